package handlers_test

import (
	"bytes"
	"fmt"
	"html"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"videogen/billing"
	"videogen/internal/domain/audit"
	"videogen/internal/testkit"
	"videogen/models"
)

// videoForm posts the console's new-video form as a browser does: multipart/form-data, the page's CSRF
// token first, then the text fields and the files in document order.
func videoForm(t *testing.T, b *browser, csrf string, fields [][2]string, files map[string][][]byte) *page {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	if csrf != "" {
		_ = w.WriteField("_csrf", csrf)
	}
	for _, f := range fields {
		_ = w.WriteField(f[0], f[1])
	}
	for _, name := range []string{"start_image", "end_image", "reference_images"} {
		list, ok := files[name]
		if !ok {
			// A file field left empty: the browser still sends the part, with an empty filename.
			part, _ := w.CreateFormFile(name, "")
			_, _ = part.Write(nil)
			continue
		}
		for i, b := range list {
			part, _ := w.CreateFormFile(name, fmt.Sprintf("%s-%d.png", name, i))
			_, _ = part.Write(b)
		}
	}
	_ = w.Close()
	req, _ := http.NewRequest("POST", b.base+"/console/videos/new", &body)
	req.Header.Set("Content-Type", w.FormDataContentType())
	return b.do(req)
}

// TestConsoleMakesAVideo: /console/videos/new offers the models some route renders, each length with
// its price; the posted form (multipart, with a first frame streamed through the upload's code) creates
// the task through the API's own service — the same reservation in the ledger — in the member's name,
// and lands on the task's live page, which follows it to completed. A refusal shows the form again with
// the API's message and leaves nothing behind (no task, no money moved, no file); a form without its
// token is refused before anything is read; a viewer is told why it cannot make videos.
func TestConsoleMakesAVideo(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil)
		owner := signUpVerified(t, s, "maker@example.com")
		acct := accountOf(t, s, "maker@example.com").AccountID
		if err := creditUSD(s, acct, "10"); err != nil {
			t.Fatal(err)
		}
		count := func(table string) int64 {
			var n int64
			if err := s.DB.R.Table(table).Where("account_id = ?", acct).Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		}

		// The dashboard and the Tasks page lead here; the model's lengths carry their prices.
		owner.get("/console").contains(t, `href="/console/videos/new"`)
		owner.get("/console/tasks").contains(t, `href="/console/videos/new"`)
		form := owner.get("/console/videos/new?model=videogen-2.0-720p")
		if form.Status != 200 {
			t.Fatalf("the form: %d", form.Status)
		}
		form.contains(t, "Make a video", `value="videogen-2.0-720p" selected`, "4 seconds · $1.20", "8 seconds · $2.40", "16:9 · 1280x720", `name="start_image"`, "Make video · $1.20")
		csrf := html.UnescapeString(csrfRE.FindStringSubmatch(form.Body)[1])

		// A length the API does not sell: its refusal, above the form, and nothing kept.
		before := balance(t, s, acct)
		tasks, files := count("tasks"), count("media")
		refused := videoForm(t, owner, csrf, [][2]string{{"model", "videogen-2.0-720p"}, {"seconds", "3"}, {"size", "1280x720"}, {"prompt", "a paper boat"}},
			map[string][][]byte{"start_image": {testkit.PNG(t, 640, 360)}})
		if refused.Status != 422 {
			t.Fatalf("a 3 s video: %d %s", refused.Status, trimPage(refused.Body))
		}
		refused.contains(t, "seconds must be a whole number of seconds from 4 to 15", "a paper boat")
		if balance(t, s, acct) != before || count("tasks") != tasks || count("media") != files {
			t.Fatalf("a refused form left something: balance %v→%v, tasks %d→%d, media %d→%d", before, balance(t, s, acct), tasks, count("tasks"), files, count("media"))
		}

		// Without its token first: refused before anything is stored.
		expired := videoForm(t, owner, "", [][2]string{{"model", "videogen-2.0-720p"}, {"seconds", "4"}, {"prompt", "no token"}}, nil)
		if expired.Status != 403 || !strings.Contains(expired.Body, "This form has expired") || count("tasks") != tasks || count("media") != files {
			t.Fatalf("a form without its token: %d", expired.Status)
		}

		// The video, with a first frame.
		once := regexp.MustCompile(`name="_once" value="([^"]+)"`).FindStringSubmatch(form.Body)[1]
		made := videoForm(t, owner, csrf, [][2]string{{"_once", once}, {"model", "videogen-2.0-720p"}, {"seconds", "4"}, {"size", "1280x720"}, {"prompt", "a paper boat on a rainy street"}},
			map[string][][]byte{"start_image": {testkit.PNG(t, 640, 360)}, "reference_images": {testkit.PNG(t, 300, 300)}})
		loc, _ := url.Parse(made.Header.Get("Location"))
		if made.Status != 303 || !strings.HasPrefix(loc.Path, "/console/tasks/video_") || loc.Query().Get("notice") != "video-created" {
			t.Fatalf("made: %d %q %s", made.Status, made.Header.Get("Location"), trimPage(made.Body))
		}
		id := strings.TrimPrefix(loc.Path, "/console/tasks/")
		// The same form posted again (a double click, a reload that re-posts): the same video, paid once.
		again := videoForm(t, owner, csrf, [][2]string{{"_once", once}, {"model", "videogen-2.0-720p"}, {"seconds", "4"}, {"size", "1280x720"}, {"prompt", "a paper boat on a rainy street"}},
			map[string][][]byte{"start_image": {testkit.PNG(t, 640, 360)}, "reference_images": {testkit.PNG(t, 300, 300)}})
		if again.Header.Get("Location") != made.Header.Get("Location") {
			t.Fatalf("the form posted twice: %d %q, first %q", again.Status, again.Header.Get("Location"), made.Header.Get("Location"))
		}
		task := testkit.Task(t, s.DB, id)
		if task.AccountID != acct || task.APIKeyID != nil || task.Seconds != 4 || task.Size != "1280x720" || task.AmountMicros != 1_200_000 {
			t.Fatalf("task %+v", task)
		}
		in, err := task.StoredInputs()
		if err != nil || in.StartImageURL == "" {
			t.Fatalf("the first frame is not the task's: %+v %v", in, err)
		}
		var reserve models.LedgerEntry
		if err := s.DB.R.Where("account_id = ? AND task_id = ? AND kind = ?", acct, id, models.KindReserve).Take(&reserve).Error; err != nil || reserve.DeltaAvailable != -1_200_000 || reserve.DeltaReserved != 1_200_000 {
			t.Fatalf("the reservation: %+v %v", reserve, err)
		}
		var created models.TaskEvent
		if err := s.DB.R.Where("task_id = ?", id).Order("id").Take(&created).Error; err != nil || !strings.Contains(created.Detail, "made in the console by maker@example.com") {
			t.Fatalf("the task log's first line: %q %v", created.Detail, err)
		}
		owner.get(loc.String()).contains(t, "Your video is queued and its price reserved", "a paper boat on a rainy street")
		testkit.Eventually(t, 60*time.Second, "the console's video completed", func() bool {
			return testkit.Task(t, s.DB, id).Status == "completed"
		})
		testkit.CheckLedger(t, s.DB)

		// A viewer reads why it cannot.
		viewer := addMember(t, s, owner, "vera@example.com", "viewer")
		p := viewer.get("/console/videos/new")
		p.contains(t, "Your role (viewer) cannot make videos in the console")
		p.lacks(t, `enctype="multipart/form-data"`)
	})
}

// TestAPIReferenceLinked: the API reference is linked from the home page, the pricing page, the console
// and every page's footer.
func TestAPIReferenceLinked(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), nil)
	visitor := newBrowser(t, s)
	for _, path := range []string{"/", "/pricing", "/terms"} {
		p := visitor.get(path)
		if n := strings.Count(p.Body, `href="/docs/api"`); p.Status != 200 || n < 2 {
			t.Errorf("%s links the API reference %d times (want the page and its footer, or the menu): %d", path, n, p.Status)
		}
	}
	member := signUpVerified(t, s, "reader@example.com")
	if p := member.get("/console"); strings.Count(p.Body, `href="/docs/api"`) < 2 {
		t.Errorf("the dashboard does not link the API reference beside its footer")
	}
}

// TestSupportCreditsTheWallet: with neither card payments nor test top-ups, the wallet and the
// dashboard's first steps say how to have the wallet credited — SUPPORT_EMAIL as a mailto link, or the
// operator when none is set — and never "Top up your wallet".
func TestSupportCreditsTheWallet(t *testing.T) {
	for _, c := range []struct {
		email string
		say   string
	}{
		{"help@videogen.example", `href="mailto:help@videogen.example?subject=Credit%20my%20videogen%20wallet"`},
		{"", "Ask the operator of this installation to credit your wallet"},
	} {
		s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"SUPPORT_EMAIL": c.email, "TEST_TOPUPS": ""})
		b := signUpVerified(t, s, "nofunds@example.com")
		wallet := b.get("/console/wallet")
		wallet.contains(t, "Card payments are not available on this installation yet", c.say, "nofunds@example.com")
		wallet.lacks(t, "Add test funds")
		dash := b.get("/console")
		dash.contains(t, c.say)
		dash.lacks(t, "Top up your wallet")
	}
}

// TestCheckInboxSaysWhereTheMailIs: where e-mails are printed to the log (no RESEND_API_KEY), the page
// after sign-up says so; where they are sent, it does not.
func TestCheckInboxSaysWhereTheMailIs(t *testing.T) {
	for key, printed := range map[string]bool{"": true, "re_test_key_123": false} {
		s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"RESEND_API_KEY": key})
		p := newBrowser(t, s).post("/signup", "/signup", url.Values{"email": {"inbox@example.com"}, "password": {"paper-boats-float-42"}, "terms": {"yes"}})
		if got := strings.Contains(p.Body, "prints its e-mails to the server's log"); got != printed || !strings.Contains(p.Body, "Check your inbox") {
			t.Errorf("RESEND_API_KEY %q: the page says the e-mail is printed: %v", key, got)
		}
	}
}

// TestAdjustmentsAsCustomersReadThem: the customer reads the note staff wrote for them beside an
// adjustment, or "Adjustment by support", never the staff's reason.
func TestAdjustmentsAsCustomersReadThem(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), nil)
	b := signUpVerified(t, s, "credited@example.com")
	acct := accountOf(t, s, "credited@example.com").AccountID
	ctx := t.Context()
	for _, a := range []billing.Adjustment{
		{AccountID: acct, Amount: 2_500_000, Reason: "ticket 4711: outage credit, approved by finance", CustomerNote: "Sorry for Tuesday's outage", By: audit.CLI},
		{AccountID: acct, Amount: 1_000_000, Reason: "internal: churn risk, do not mention", By: audit.CLI},
	} {
		if _, err := a.Apply(ctx, s.DB); err != nil {
			t.Fatal(err)
		}
	}
	wallet := b.get("/console/wallet")
	wallet.contains(t, "Sorry for Tuesday&#39;s outage", "Adjustment by support", "$3.50")
	wallet.lacks(t, "ticket 4711", "churn risk")
	// The Statements page, in the menu, lists the month; its statement lists the adjustments the same way.
	month := time.Now().UTC().Format("2006-01")
	list := b.get("/console/statements")
	list.contains(t, `<a href="/console/statements" aria-current="page">Statements</a>`, `href="/console/statements/`+month+`"`, "counted in the account's time zone, UTC")
	statement := b.get("/console/statements/" + month)
	statement.contains(t, "Adjustment by support: Sorry for Tuesday&#39;s outage", "Adjustment by support")
	statement.lacks(t, "ticket 4711", "churn risk")
}
