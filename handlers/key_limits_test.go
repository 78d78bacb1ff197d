package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/apikeys"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// limitedKey makes a key of the account with these limits, as the console's form would, and returns
// its secret and row.
func limitedKey(t *testing.T, s *testkit.Server, accountID int64, name string, l apikeys.Limits) (string, models.APIKey) {
	t.Helper()
	ctx := context.Background()
	secret, k, err := apikeys.Create(ctx, s.DB, accountID, name, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := apikeys.SetLimits(ctx, s.DB, accountID, k.ID, l); err != nil {
		t.Fatal(err)
	}
	return secret, *k
}

// written is what a refused create must leave as it was: every task, ledger entry and stored file, and
// the account's balances.
type written struct {
	tasks, entries, media int64
	balances              [2]int64
}

func writtenOf(t *testing.T, s *testkit.Server, accountID int64) written {
	t.Helper()
	var w written
	s.DB.R.Model(&models.Task{}).Count(&w.tasks)
	s.DB.R.Model(&models.LedgerEntry{}).Count(&w.entries)
	s.DB.R.Model(&models.Media{}).Count(&w.media)
	w.balances = balance(t, s, accountID)
	return w
}

// noonToday is a clock at 12:00 UTC of the last day whose noon has passed, so that no test's day ends
// while it runs.
func noonToday() *movableClock {
	c := &movableClock{}
	now := time.Now().UTC()
	noon := time.Date(now.Year(), now.Month(), now.Day(), 12, 0, 0, 0, time.UTC)
	if noon.After(now) {
		// Never ahead of the wall clock: storage stamps files by it, and the storage sweep would take an
		// output written a moment ago, not yet named by its task's row, for one over an hour old.
		noon = noon.AddDate(0, 0, -1)
	}
	c.moveTo(noon)
	return c
}

// TestKeyLimitsForm: the key form takes spend_limit_usd, limit_period and models (repeated); what is
// wrong is refused beside its field with the values kept, and no key is made; a key made with limits
// shows them and its spend (and support sees them); the edit form changes them and refuses the same
// mistakes.
func TestKeyLimitsForm(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "lim@example.com")
		keys := func() int64 {
			var n int64
			s.DB.R.Model(&models.APIKey{}).Count(&n)
			return n
		}
		for _, tc := range []struct {
			name          string
			spend, period string
			models        []string
			field, msg    string
		}{
			{"negative", "-5", "day", nil, "spend_limit_usd", "more than $0"},
			{"zero", "0", "day", nil, "spend_limit_usd", "more than $0"},
			{"zero cents", "0.00", "month", nil, "spend_limit_usd", "more than $0"},
			{"words", "five dollars", "day", nil, "spend_limit_usd", "such as 5 or 12.50"},
			{"seven decimals", "1.0000001", "day", nil, "spend_limit_usd", "such as 5 or 12.50"},
			{"too large", "5000000", "day", nil, "spend_limit_usd", "at most $1,000,000"},
			{"a week", "5", "week", nil, "limit_period", "day or month"},
			{"no period", "5", "", nil, "limit_period", "per day or per month"},
			{"unknown model", "", "month", []string{"videogen-2.0-720p", "sora-2"}, "models", `"sora-2" is not a model`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := keys()
				form := url.Values{"name": {"capped"}, "spend_limit_usd": {tc.spend}, "limit_period": {tc.period}, "models": tc.models}
				p := b.post("/console/keys", "/console/keys", form)
				if p.Status != 422 {
					t.Fatalf("status %d, want 422", p.Status)
				}
				p.contains(t, `id="`+tc.field+`-error"`, tc.msg, `value="capped"`)
				if tc.spend != "" {
					p.contains(t, `value="`+tc.spend+`"`)
				}
				if keys() != before {
					t.Fatal("a key was made from a refused form")
				}
			})
		}

		// A key with a limit per day and two models: stored exactly, shown with its spend.
		p := b.post("/console/keys", "/console/keys", url.Values{"name": {"capped"}, "spend_limit_usd": {"$5"}, "limit_period": {"day"},
			"models": {"videogen-2.0-mini-480p", "videogen-2.0-720p"}})
		m := secretRE.FindStringSubmatch(p.Body)
		if p.Status != 200 || m == nil {
			t.Fatalf("create a limited key: %d", p.Status)
		}
		var k models.APIKey
		s.DB.R.Where("prefix = ?", m[1][:11]).Take(&k)
		if k.SpendLimitMicros == nil || *k.SpendLimitMicros != 5_000_000 || k.LimitPeriod != "day" || k.AllowedModels != "videogen-2.0-720p,videogen-2.0-mini-480p" {
			t.Fatalf("stored limits %v %q %q", k.SpendLimitMicros, k.LimitPeriod, k.AllowedModels)
		}
		// An empty limit is none, whatever the period select says.
		free := createKey(t, b, "free")
		list := b.get("/console/keys")
		list.contains(t, "$0.00 spent today", "$0.00 of the $5.00 limit", "videogen-2.0-720p, videogen-2.0-mini-480p", "$0.00 spent this month", "every model",
			"counted in the account's time zone (UTC)")
		var fk models.APIKey
		s.DB.R.Where("prefix = ?", free[:11]).Take(&fk)
		if fk.SpendLimitMicros != nil || fk.LimitPeriod != "" || fk.AllowedModels != "" {
			t.Fatalf("a key without limits stored %v %q %q", fk.SpendLimitMicros, fk.LimitPeriod, fk.AllowedModels)
		}

		// Support sees each key's limits on the account's page.
		st := signInStaff(t, s, "staff@example.com", models.RoleSupport)
		st.get("/support/accounts/"+strconv.FormatInt(k.AccountID, 10)).contains(t,
			"limit $5.00 per day · videogen-2.0-720p, videogen-2.0-mini-480p", "no spend limit · every model")

		// The edit form shows the limits and changes them.
		edit := "/console/keys/" + itoa(int(k.ID)) + "/limits"
		e := b.get(edit)
		e.contains(t, "Limits of capped", `value="5"`, `<option value="day" selected>`, `value="videogen-2.0-720p" checked`, `value="videogen-2.0-mini-480p" checked`)
		e.lacks(t, `value="videogen-2.0-1080p" checked`)
		if p := b.post(edit, edit, url.Values{"spend_limit_usd": {"-1"}, "limit_period": {"month"}}); p.Status != 422 || !strings.Contains(p.Body, `id="spend_limit_usd-error"`) {
			t.Fatalf("edit with a negative limit: %d", p.Status)
		}
		p = b.post(edit, edit, url.Values{"spend_limit_usd": {"12.50"}, "limit_period": {"month"}})
		if p.Status != 303 || !strings.Contains(p.location(), "key-limits-saved") {
			t.Fatalf("save limits: %d %s", p.Status, p.location())
		}
		b.get(p.location()).contains(t, "limits were saved", "$0.00 spent this month", "$0.00 of the $12.50 limit")
		s.DB.R.Take(&k, k.ID)
		if *k.SpendLimitMicros != 12_500_000 || k.LimitPeriod != "month" || k.AllowedModels != "" {
			t.Fatalf("edited limits %v %q %q", *k.SpendLimitMicros, k.LimitPeriod, k.AllowedModels)
		}
		// Another account's key cannot be seen or changed through this one's console.
		other := signUpVerified(t, s, "other@example.com")
		if p := other.get(edit); p.Status != 404 {
			t.Fatalf("another account's key limits page: %d", p.Status)
		}
		if p := other.post("/console/keys", edit, url.Values{"spend_limit_usd": {"1"}, "limit_period": {"day"}}); p.Status != 404 {
			t.Fatalf("another account's key limits saved: %d", p.Status)
		}
	})
}

// TestKeySpendLimit: a key limited to $2.40 a day (two 4 s 720p videos): a failed video gives its room
// back, a completed one does not, so after one of each it creates one more, and the next is refused
// with 429 key_spend_limit_reached, the limit, the spend, the price and the reset in its message,
// before anything is reserved; another key of the account is not held to it; an Idempotency-Key
// replay still answers its video; the keys page shows the spend; the next day the key creates again.
func TestKeySpendLimit(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		clock := noonToday()
		s := testkit.StartWith(t, dbURL, map[string]string{"TEST_TOPUPS": "1"}, server.Options{Now: clock.Now()})
		b := signUpVerified(t, s, "cap@example.com")
		addFunds(t, b, "20")
		p := b.post("/console/keys", "/console/keys", url.Values{"name": {"capped"}, "spend_limit_usd": {"2.40"}, "limit_period": {"day"}})
		key := secretRE.FindStringSubmatch(p.Body)[1]
		free := createKey(t, b, "free")
		acct := accountOf(t, s, "cap@example.com").AccountID
		video := func(prompt string) map[string]any {
			return map[string]any{"model": "videogen-2.0-720p", "prompt": prompt}
		} // $1.20

		// One video fails (its reservation released), one completes (charged): $1.20 of the limit is spent.
		failing := s.CreateVideo(t, key, video("[sim:fail] first"), "Idempotency-Key", "first")["id"].(string)
		done := s.CreateVideo(t, key, video("second"))["id"].(string)
		s.WaitStatus(t, key, failing, 20*time.Second, "failed")
		s.WaitStatus(t, key, done, 20*time.Second, "completed")
		third := s.CreateVideo(t, key, video("third"))["id"].(string) // the failed video's room

		before := writtenOf(t, s, acct)
		sent := clock.now()
		r := s.Do(t, "POST", "/v1/videos", key, video("fourth"))
		now := clock.now().UTC()
		reset := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
		if r.Status != 429 || r.ErrorCode() != "key_spend_limit_reached" {
			t.Fatalf("over the limit: %d %s", r.Status, r.Body)
		}
		msg := r.JSON(t)["error"].(map[string]any)
		if msg["type"] != "rate_limit_error" || msg["param"] != nil {
			t.Errorf("error %v", msg)
		}
		for _, part := range []string{"may spend $2.40 per day", "has $2.40 reserved or charged today", "this video costs $1.20",
			"resets at " + reset.Format(time.RFC3339) + " (UTC, the account's time zone)"} {
			if !strings.Contains(msg["message"].(string), part) {
				t.Errorf("the message %q lacks %q", msg["message"], part)
			}
		}
		if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < int(reset.Sub(now).Seconds()) || ra > int(reset.Sub(sent).Seconds())+1 {
			t.Errorf("Retry-After %q, want the %v to the reset", r.Header.Get("Retry-After"), reset.Sub(now))
		}
		if r.Header.Get("x-should-retry") != "false" {
			t.Errorf("x-should-retry %q: SDKs would retry a limit that resets at midnight", r.Header.Get("x-should-retry"))
		}
		if after := writtenOf(t, s, acct); after != before {
			t.Fatalf("a refused create wrote: before %+v, after %+v", before, after)
		}

		// The limit is the key's: the account's other key creates.
		other := s.CreateVideo(t, free, video("with the other key"))["id"].(string)
		// A replay is the first answer again, at the limit, and reserves nothing.
		if r := s.Do(t, "POST", "/v1/videos", key, video("[sim:fail] first"), "Idempotency-Key", "first"); r.Status != 200 ||
			r.JSON(t)["id"] != failing || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay at the limit: %d %s", r.Status, r.Body)
		}
		s.WaitStatus(t, key, third, 20*time.Second, "completed")
		s.WaitStatus(t, free, other, 20*time.Second, "completed")
		b.get("/console/keys").contains(t, "$2.40 spent today", "$2.40 of the $2.40 limit", "$1.20 spent this month")

		// Tomorrow, in the account's zone (UTC here), the key creates again.
		clock.moveTo(reset.Add(time.Minute))
		s.CreateVideo(t, key, video("the next day"))
		b.get("/console/keys").contains(t, "$1.20 of the $2.40 limit")
		testkit.CheckLedger(t, s.DB)
	})
}

// TestKeyLimitDayInAccountZone: a day limit counts the account's day. In Europe/Berlin a key spends its
// limit at 23:30; ten minutes past midnight in Berlin — the same day still in UTC — it may create again,
// and the refusal before midnight named the reset in Berlin's time and in UTC.
func TestKeyLimitDayInAccountZone(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		berlin, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		today := time.Now().In(berlin)
		lateEvening := time.Date(today.Year(), today.Month(), today.Day(), 23, 30, 0, 0, berlin)
		midnight := time.Date(today.Year(), today.Month(), today.Day()+1, 0, 0, 0, 0, berlin)
		clock := &movableClock{}
		clock.moveTo(lateEvening)
		s := testkit.StartWith(t, dbURL, map[string]string{"WORKERS": "false"}, server.Options{Now: clock.Now()})
		acct := s.NewAccount(t, "10")
		if err := accounts.SetAccountTimeZone(context.Background(), s.DB, acct.ID, "Europe/Berlin", clock.now()); err != nil {
			t.Fatal(err)
		}
		key, _ := limitedKey(t, s, acct.ID, "daily", apikeys.Limits{Spend: 200_000, Period: apikeys.PeriodDay}) // one mini 480p video
		video := map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "late"}
		s.CreateVideo(t, key, video)
		r := s.Do(t, "POST", "/v1/videos", key, video)
		if r.Status != 429 || r.ErrorCode() != "key_spend_limit_reached" {
			t.Fatalf("before midnight in Berlin: %d %s", r.Status, r.Body)
		}
		want := fmt.Sprintf("resets at %s (Europe/Berlin, the account's time zone; %s in UTC)", midnight.Format(time.RFC3339), midnight.UTC().Format(time.RFC3339))
		if !strings.Contains(string(r.Body), want) {
			t.Fatalf("the refusal %s lacks %q", r.Body, want)
		}
		clock.moveTo(midnight.Add(10 * time.Minute))
		if clock.now().UTC().Day() != lateEvening.UTC().Day() {
			t.Fatalf("the test's times are not on one UTC day: %s and %s", lateEvening.UTC(), clock.now().UTC())
		}
		s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "just past midnight"})
		if r := s.Do(t, "POST", "/v1/videos", key, video); r.Status != 429 {
			t.Fatalf("the new day's limit: %d %s", r.Status, r.Body)
		}
	})
}

// TestConcurrentCreatesKeepTheKeyLimit: a key limited to exactly N videos a day sends 4N creates at
// once, with funds for all of them: exactly N are accepted, 3N get 429 key_spend_limit_reached, none a
// 5xx; the ledger invariant holds while the N run to completion, and their charges still count.
func TestConcurrentCreatesKeepTheKeyLimit(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		const n = 12
		clock := noonToday()
		s := testkit.StartWith(t, dbURL, map[string]string{"MAX_QUEUED_PER_ACCOUNT": "1000"}, server.Options{Now: clock.Now()})
		acct := s.NewAccount(t, "100")                                                                                 // 4N × $1.20 = $57.60: the balance stops none
		key, _ := limitedKey(t, s, acct.ID, "racing", apikeys.Limits{Spend: n * 1_200_000, Period: apikeys.PeriodDay}) // N × 720p 4 s

		start := make(chan struct{})
		var wg sync.WaitGroup
		statuses := make([]int, 4*n)
		codes := make([]string, 4*n)
		for i := range statuses {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				r := s.Do(t, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-720p", "prompt": fmt.Sprintf("task %d", i)})
				statuses[i], codes[i] = r.Status, r.ErrorCode()
			}(i)
		}
		close(start)
		wg.Wait()
		count := map[int]int{}
		for i, st := range statuses {
			count[st]++
			if st == 429 && codes[i] != "key_spend_limit_reached" {
				t.Errorf("429 with code %q", codes[i])
			}
		}
		if count[200] != n || count[429] != 3*n || len(count) != 2 {
			t.Fatalf("statuses %v, want %d×200 and %d×429", count, n, 3*n)
		}
		testkit.CheckLedger(t, s.DB)

		var open int64
		// Each accepted video is rendered by the simulator under -race, beside the other database's run:
		// on a loaded 2-core machine that can take minutes. The wait ends as soon as the last one finishes.
		testkit.Eventually(t, 3*time.Minute, "every accepted task finishes", func() bool {
			s.DB.R.Model(&models.Task{}).Where("account_id = ? AND status NOT IN ?", acct.ID, []string{"completed", "failed"}).Count(&open)
			return open == 0
		}, func() string { return fmt.Sprintf("%d tasks still open", open) })
		if got := balance(t, s, acct.ID); got != [2]int64{100_000_000 - n*1_200_000, 0} {
			t.Fatalf("balances %v after %d charges of $1.20", got, n)
		}
		// Charged is spent: the key stays at its limit.
		if r := s.Do(t, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-720p", "prompt": "one more"}); r.Status != 429 {
			t.Fatalf("after the charges: %d %s", r.Status, r.Body)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// countingTransport counts the requests an SDK sends.
type countingTransport struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// TestKeyModels: a key limited to some models is refused any other with 403 model_not_allowed_for_key
// (param model, the key's models named) before anything is written, in a create and in a remix (whose
// model is its source's); a remix is held to the key's spend limit too, and openai-go, retries on, sends
// a refused create once.
func TestKeyModels(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		clock := noonToday()
		s := testkit.StartWith(t, dbURL, nil, server.Options{Now: clock.Now()})
		acct := s.NewAccount(t, "20")
		mini, _ := limitedKey(t, s, acct.ID, "mini", apikeys.Limits{Models: []string{"videogen-2.0-mini-480p"}})
		hd, _ := limitedKey(t, s, acct.ID, "hd", apikeys.Limits{Models: []string{"videogen-2.0-720p", "videogen-2.0-1080p"}})
		capped, _ := limitedKey(t, s, acct.ID, "capped", apikeys.Limits{Spend: 300_000, Period: apikeys.PeriodMonth}) // one mini video

		before := writtenOf(t, s, acct.ID)
		r := s.Do(t, "POST", "/v1/videos", mini, map[string]any{"model": "videogen-2.0-720p", "prompt": "too sharp"})
		e := r.JSON(t)["error"].(map[string]any)
		if r.Status != 403 || r.ErrorCode() != "model_not_allowed_for_key" || e["param"] != "model" || e["type"] != "permission_error" ||
			!strings.Contains(e["message"].(string), "only with videogen-2.0-mini-480p, not with videogen-2.0-720p") {
			t.Fatalf("a model the key may not use: %d %s", r.Status, r.Body)
		}
		if after := writtenOf(t, s, acct.ID); after != before {
			t.Fatalf("a refused create wrote: before %+v, after %+v", before, after)
		}
		src := s.CreateVideo(t, mini, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a boat"})["id"].(string)
		s.WaitStatus(t, mini, src, 20*time.Second, "completed")

		// A remix's model is its source's: the hd key may not, the mini key may.
		before = writtenOf(t, s, acct.ID)
		r = s.Do(t, "POST", "/v1/videos/"+src+"/remix", hd, map[string]any{"prompt": "the boat at night"})
		if r.Status != 403 || r.ErrorCode() != "model_not_allowed_for_key" ||
			!strings.Contains(string(r.Body), "only with videogen-2.0-720p and videogen-2.0-1080p, not with videogen-2.0-mini-480p") {
			t.Fatalf("a remix of a model the key may not use: %d %s", r.Status, r.Body)
		}
		if after := writtenOf(t, s, acct.ID); after != before {
			t.Fatalf("a refused remix wrote (its copy of the source kept?): before %+v, after %+v", before, after)
		}
		if r := s.Do(t, "POST", "/v1/videos/"+src+"/remix", mini, map[string]any{"prompt": "the boat at dawn"}); r.Status != 200 {
			t.Fatalf("a remix the key may make: %d %s", r.Status, r.Body)
		}

		// A remix counts against a spend limit as a create does.
		if r := s.Do(t, "POST", "/v1/videos/"+src+"/remix", capped, map[string]any{"prompt": "first remix"}); r.Status != 200 {
			t.Fatalf("a remix within the limit: %d %s", r.Status, r.Body)
		}
		before = writtenOf(t, s, acct.ID)
		r = s.Do(t, "POST", "/v1/videos/"+src+"/remix", capped, map[string]any{"prompt": "second remix"})
		if r.Status != 429 || r.ErrorCode() != "key_spend_limit_reached" || !strings.Contains(string(r.Body), "may spend $0.30 per month; it has $0.20 reserved or charged this month") {
			t.Fatalf("a remix over the limit: %d %s", r.Status, r.Body)
		}
		if after := writtenOf(t, s, acct.ID); after != before {
			t.Fatalf("a refused remix wrote: before %+v, after %+v", before, after)
		}

		// openai-go with its retries on: x-should-retry: false keeps it to one request.
		sent := &countingTransport{next: testkit.OpenAPITransport(t, nil)}
		client := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey(capped), option.WithMaxRetries(2),
			option.WithHTTPClient(&http.Client{Transport: sent}))
		_, err := client.Videos.New(context.Background(), openai.VideoNewParams{Prompt: "over", Model: "videogen-2.0-mini-480p"})
		if e := apiError(t, err); e.StatusCode != 429 || e.Code != "key_spend_limit_reached" || sent.n.Load() != 1 {
			t.Fatalf("openai-go: %d %s after %d requests", e.StatusCode, e.Code, sent.n.Load())
		}
	})
}

// TestConcurrentRetriesAtTheKeyLimit: a key with room for exactly one video gets the same create, with
// one Idempotency-Key, 8 times at once (a client retrying over a flaky network): every answer is that
// one video — none is refused as over the limit because another copy of it took the room.
func TestConcurrentRetriesAtTheKeyLimit(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		clock := noonToday()
		s := testkit.StartWith(t, dbURL, map[string]string{"WORKERS": "false"}, server.Options{Now: clock.Now()})
		acct := s.NewAccount(t, "10")
		key, _ := limitedKey(t, s, acct.ID, "one", apikeys.Limits{Spend: 200_000, Period: apikeys.PeriodDay}) // one mini 480p video
		start := make(chan struct{})
		var wg sync.WaitGroup
		answers := make([]string, 8)
		for i := range answers {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				r := s.Do(t, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "once"}, "Idempotency-Key", "retry-me")
				answers[i] = strconv.Itoa(r.Status) + " " + r.ErrorCode()
				if r.Status == 200 {
					answers[i] += r.JSON(t)["id"].(string)
				}
			}(i)
		}
		close(start)
		wg.Wait()
		for _, a := range answers {
			if a != answers[0] || !strings.HasPrefix(a, "200 video_") {
				t.Fatalf("answers %v, want one video 8 times", answers)
			}
		}
		var tasks int64
		s.DB.R.Model(&models.Task{}).Count(&tasks)
		if tasks != 1 {
			t.Fatalf("%d tasks", tasks)
		}
	})
}

// TestKeySpendSaysWhatItCounts: "spent" on the keys page is what the Usage page calls spend (charged
// videos); what running videos hold is said beside it, and the limit counts both (docs/usage.md, "Spend").
func TestKeySpendSaysWhatItCounts(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
	b := signUpVerified(t, s, "counts@example.com")
	addFunds(t, b, "10")
	p := b.post("/console/keys", "/console/keys", url.Values{"name": {"capped"}, "spend_limit_usd": {"5"}, "limit_period": {"month"}})
	key := secretRE.FindStringSubmatch(p.Body)[1]
	s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "held", "seconds": 4}) // $0.20, queued: no worker runs
	keys := b.get("/console/keys")
	keys.contains(t, "$0.00 spent this month", "+ $0.20 reserved for running videos", "$0.20 of the $5.00 limit",
		"Spent is what completed videos were charged, the same figure as on the Usage page", "A spend limit counts both.")
	usagePage := b.get("/console/usage?group=key")
	if rows := pageUsage(t, usagePage.Body); len(rows) == 0 || rows[len(rows)-1].Spent != 0 {
		t.Errorf("the Usage page's spend of a running video: %+v, want $0.00 (it is reserved, not spent)", rows)
	}
}
