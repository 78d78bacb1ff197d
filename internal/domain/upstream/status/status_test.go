package status_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/upstream/status"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// now is the moment the tests read at; the seeded times are relative to it.
var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func seedCredential(t *testing.T, d *db.DB, c models.UpstreamCredential) {
	t.Helper()
	c.CreatedAt, c.UpdatedAt = now.Add(-time.Hour), now.Add(-time.Hour)
	if err := d.W.Create(&c).Error; err != nil {
		t.Fatalf("seed credential %s: %v", c.ID, err)
	}
}

func seedHealth(t *testing.T, d *db.DB, h models.UpstreamHealth) {
	t.Helper()
	if err := d.W.Create(&h).Error; err != nil {
		t.Fatalf("seed health %s/%s: %v", h.CredentialID, h.Instance, err)
	}
}

// TestRead: each credential's row merges the reports of the instances that wrote within the freshness
// window — the worst breaker, calls and errors summed, the worst percentiles, the newest error — and
// ignores the stale ones, whatever time zone each time was written in; a credential the provider refused
// says so, with the reason clipped; one no longer in service, and no instance reporting, says that.
func TestRead(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := testkit.OpenDB(t, url)
		ctx := context.Background()
		newYork, _ := time.LoadLocation("America/New_York")
		tokyo, _ := time.LoadLocation("Asia/Tokyo")

		seedCredential(t, d, models.UpstreamCredential{ID: "ark-main", Provider: "ark", Label: "main", BaseURL: "https://ark.example/api/v3",
			MaxConcurrency: 8, InFlight: 3, Enabled: true})
		seedCredential(t, d, models.UpstreamCredential{ID: "openai-backup", Provider: "openai", Label: "backup", BaseURL: "https://api.openai.example/v1",
			MaxConcurrency: 2, Enabled: true, AuthError: ptr("401 invalid_api_key: Incorrect API key provided: sk-…REDACTED"), AuthErrorAt: ptr(now.Add(-10 * time.Minute))})
		seedCredential(t, d, models.UpstreamCredential{ID: "sim-old", Provider: "sim", Label: "old", MaxConcurrency: 4, Enabled: false})

		seedHealth(t, d, models.UpstreamHealth{CredentialID: "ark-main", Instance: "web-1", Breaker: "closed", Calls: 100, Errors: 5,
			P50Ms: 800, P95Ms: 2000, P99Ms: 4000, LastError: "upstream 503: busy", LastErrorAt: ptr(now.Add(-2 * time.Minute)), UpdatedAt: now.Add(-5 * time.Second)})
		// Fresh, written in New York time (as text on SQLite, earlier than the cutoff's digits).
		seedHealth(t, d, models.UpstreamHealth{CredentialID: "ark-main", Instance: "web-2", Breaker: "half-open", Calls: 60, Errors: 20,
			P50Ms: 900, P95Ms: 1800, P99Ms: 5000, LastError: "poll: timeout after\n30s", LastErrorAt: ptr(now.Add(-30 * time.Second).In(newYork)),
			UpdatedAt: now.Add(-20 * time.Second).In(newYork)})
		// Stale, written in Tokyo time (as text on SQLite, later than the cutoff's digits): its open breaker,
		// its calls, its latency and its newer error are not counted.
		seedHealth(t, d, models.UpstreamHealth{CredentialID: "ark-main", Instance: "web-3", Breaker: "open", Calls: 1000, Errors: 1000,
			P50Ms: 99_999, P95Ms: 99_999, P99Ms: 99_999, LastError: "stale", LastErrorAt: ptr(now.Add(-2 * time.Second)),
			UpdatedAt: now.Add(-5 * time.Minute).In(tokyo)})
		// Exactly at the cutoff still counts.
		long := strings.Repeat("é", 150) + strings.Repeat("x", 150)
		seedHealth(t, d, models.UpstreamHealth{CredentialID: "openai-backup", Instance: "web-1", Breaker: "open", Calls: 3, Errors: 3,
			P50Ms: 120, P95Ms: 130, P99Ms: 140, LastError: long, LastErrorAt: ptr(now.Add(-40 * time.Second)), UpdatedAt: now.Add(-time.Minute)})
		// A report about a credential the table does not hold is no row of its own.
		seedHealth(t, d, models.UpstreamHealth{CredentialID: "gone", Instance: "web-1", Breaker: "closed", UpdatedAt: now})

		rows, err := status.Read(ctx, d, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		want := []status.Row{
			{ID: "openai-backup", Name: "backup", Kind: "openai", BaseURL: "https://api.openai.example/v1", Enabled: true, State: status.StateRefused,
				Breaker: "open", MaxConcurrency: 2, Calls: 3, Errors: 3, ErrorPermille: 1000, P50Ms: 120, P95Ms: 130, P99Ms: 140,
				LastError: strings.Repeat("é", 150) + strings.Repeat("x", 49) + "…", LastErrorAt: ptr(now.Add(-40 * time.Second)),
				AuthError: "401 invalid_api_key: Incorrect API key provided: sk-…REDACTED", AuthErrorAt: ptr(now.Add(-10 * time.Minute)), Instances: 1},
			{ID: "ark-main", Name: "main", Kind: "ark", BaseURL: "https://ark.example/api/v3", Enabled: true, State: status.StateInService,
				Breaker: "half-open", InFlight: 3, MaxConcurrency: 8, Calls: 160, Errors: 25, ErrorPermille: 156, P50Ms: 900, P95Ms: 2000, P99Ms: 5000,
				LastError: "poll: timeout after\n30s", LastErrorAt: ptr(now.Add(-30 * time.Second)), Instances: 2},
			{ID: "sim-old", Name: "old", Kind: "sim", State: status.StateOut, Breaker: status.BreakerUnknown, MaxConcurrency: 4},
		}
		if got, want := jsonOf(t, rows), jsonOf(t, want); got != want {
			t.Errorf("rows:\n got %s\nwant %s", got, want)
		}
		if rate := rows[1].ErrorRate(); rate != "15.6%" {
			t.Errorf("error rate of %s: %s, want 15.6%%", rows[1].ID, rate)
		}
		if rate := rows[2].ErrorRate(); rate != "–" {
			t.Errorf("error rate without calls: %s", rate)
		}
		if n := len([]rune(rows[0].LastError)); n != status.MaxErrorText {
			t.Errorf("a long error is clipped to %d characters, want %d", n, status.MaxErrorText)
		}

		// Housekeeping deletes the report stale for over two minutes, whatever zone it was written in,
		// and keeps the live ones, however their text compares.
		n, err := status.Stale(ctx, d, now, 2*time.Minute)
		if err != nil || n != 1 {
			t.Fatalf("stale: deleted %d (%v), want 1", n, err)
		}
		var left []models.UpstreamHealth
		if err := d.R.Order("credential_id, instance").Find(&left).Error; err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, h := range left {
			keys = append(keys, h.CredentialID+"/"+h.Instance)
		}
		if got := strings.Join(keys, " "); got != "ark-main/web-1 ark-main/web-2 gone/web-1 openai-backup/web-1" {
			t.Errorf("left after housekeeping: %s", got)
		}
		if _, err := status.Stale(ctx, d, now, 0); err == nil {
			t.Error("an age of 0 would delete every report; it must be refused")
		}
		// With a wider window the stale one would have counted; it is gone now, so the row is unchanged.
		rows, err = status.Read(ctx, d, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if rows[1].Breaker != "half-open" || rows[1].Calls != 160 || rows[1].Instances != 2 {
			t.Errorf("after housekeeping: %+v", rows[1])
		}
	})
}

// TestReadEmpty: no credential is an empty list (JSON [], not null).
func TestReadEmpty(t *testing.T) {
	d := testkit.OpenDB(t, testkit.SQLiteURL(t))
	rows, err := status.Read(context.Background(), d, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(t, rows); got != "[]" {
		t.Errorf("no credential: %s", got)
	}
}

// TestBreakerWorstOf: the merged breaker is the worst of the live instances', in any order, and a state
// nobody knows is shown rather than hidden behind a closed one.
func TestBreakerWorstOf(t *testing.T) {
	d := testkit.OpenDB(t, testkit.SQLiteURL(t))
	for i, c := range []struct {
		breakers []string
		want     string
	}{
		{[]string{"closed"}, "closed"},
		{[]string{"closed", "closed"}, "closed"},
		{[]string{"open", "closed"}, "open"},
		{[]string{"closed", "half-open"}, "half-open"},
		{[]string{"half-open", "open", "closed"}, "open"},
		{[]string{"closed", "tripped"}, "tripped"},
		{nil, "unknown"},
	} {
		id := "cred-" + string(rune('a'+i))
		seedCredential(t, d, models.UpstreamCredential{ID: id, Provider: "sim", Label: id, MaxConcurrency: 1, Enabled: true})
		for j, b := range c.breakers {
			seedHealth(t, d, models.UpstreamHealth{CredentialID: id, Instance: "web-" + string(rune('1'+j)), Breaker: b, UpdatedAt: now})
		}
		rows, err := status.Read(context.Background(), d, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := rows[i]; got.ID != id || got.Breaker != c.want || got.Instances != len(c.breakers) {
			t.Errorf("%v: %s breaker %q of %d instance(s), want %q", c.breakers, got.ID, got.Breaker, got.Instances, c.want)
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadMarks: an account out of credit reads as such, not as a refused key; the routes a live
// instance found refused are listed with why, and an instance gone silent no longer counts.
func TestReadMarks(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := testkit.OpenDB(t, url)
		seedCredential(t, d, models.UpstreamCredential{ID: "oai", Provider: "openai", Label: "oai", MaxConcurrency: 2, Enabled: true,
			AuthError: ptr("upstream account out of credit: HTTP 429 insufficient_quota"), AuthErrorAt: ptr(now.Add(-time.Minute)), AuthErrorKind: ptr("credit")})
		seedCredential(t, d, models.UpstreamCredential{ID: "ark", Provider: "ark", Label: "ark", MaxConcurrency: 2, Enabled: true})
		seedHealth(t, d, models.UpstreamHealth{CredentialID: "ark", Instance: "web-1", Breaker: "closed",
			ClosedRoutes: "videogen-2.0-1080p: ark submit: HTTP 403 OperationDenied.ServiceNotOpen", UpdatedAt: now.Add(-5 * time.Second)})
		seedHealth(t, d, models.UpstreamHealth{CredentialID: "ark", Instance: "gone", Breaker: "closed",
			ClosedRoutes: "videogen-2.0-720p: long ago", UpdatedAt: now.Add(-time.Hour)})
		rows, err := status.Read(context.Background(), d, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]status.Row{}
		for _, r := range rows {
			byID[r.ID] = r
		}
		if r := byID["oai"]; r.State != status.StateNoCredit || !strings.Contains(r.AuthError, "insufficient_quota") {
			t.Fatalf("out of credit: %+v", r)
		}
		if r := byID["ark"]; r.State != status.StateInService || len(r.ClosedRoutes) != 1 ||
			r.ClosedRoutes["videogen-2.0-1080p"] != "ark submit: HTTP 403 OperationDenied.ServiceNotOpen" {
			t.Fatalf("closed routes: %+v", r)
		}
	})
}
