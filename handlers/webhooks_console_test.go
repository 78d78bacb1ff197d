package handlers_test

import (
	"context"
	"html"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"videogen/internal/domain/webhooks"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

var whsecRE = regexp.MustCompile(`<code id="new-secret">(whsec_[^<]+)</code>`)

// shownSecret is the signing secret an answer shows once, or "".
func shownSecret(p *page) string {
	m := whsecRE.FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

var endpointLinkRE = regexp.MustCompile(`href="/console/webhooks/(we_[A-Za-z0-9]+)"`)

// TestWebhooksConsole walks the Webhooks page as a customer: add an endpoint (secret shown once, never
// again), send a test event that openai-go verifies, rotate the secret (the old one signs beside the new
// for 24 hours: both verify), disable (nothing sent, the event waits), enable (it goes out), resend
// (same webhook-id), delete. Another account's endpoint is a 404.
func TestWebhooksConsole(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		rcv := &hookReceiver{}
		s, _ := startHooks(t, dbURL, nil, rcv)
		email := "hooks-" + strings.ToLower(t.Name()[len(t.Name())-6:]) + "@example.com"
		b := signUpVerified(t, s, email)

		empty := b.get("/console/webhooks")
		empty.contains(t, "No endpoints yet", "Add an endpoint", `name="events" value="video.completed"`)

		added := b.submit("/console/webhooks", "url", url.Values{"url": {"https://hooks.example.com/in"}, "events": {"video.completed", "video.failed"}})
		secret := shownSecret(added)
		if added.Status != 200 || secret == "" {
			t.Fatalf("adding an endpoint: %d, no secret shown: %s", added.Status, trimPage(added.Body))
		}
		if cc := added.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("the answer that shows the secret has Cache-Control %q", cc)
		}
		m := endpointLinkRE.FindStringSubmatch(b.get("/console/webhooks").Body)
		if m == nil {
			t.Fatal("the list does not link the endpoint")
		}
		id := m[1]
		again := b.get("/console/webhooks/" + id)
		if strings.Contains(again.Body, secret) || strings.Contains(b.get("/console/webhooks").Body, secret) {
			t.Fatal("the secret is shown a second time")
		}
		again.contains(t, "whsec_…"+secret[len(secret)-4:], "No attempts yet")
		var row models.WebhookEndpoint
		if err := s.DB.R.Where("id = ?", id).Take(&row).Error; err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(row.SecretSealed), strings.TrimPrefix(secret, "whsec_")) {
			t.Fatal("the secret is stored in the clear")
		}

		verify := func(d delivery, secrets ...string) {
			t.Helper()
			for _, sec := range secrets {
				c := openai.NewClient(option.WithWebhookSecret(sec), option.WithAPIKey("unused"))
				if _, err := c.Webhooks.Unwrap(d.Body, d.Header); err != nil {
					t.Errorf("secret %s…: %v", sec[:10], err)
				}
			}
		}

		// A test event, of the type chosen.
		p := b.submit("/console/webhooks/"+id, "type", url.Values{"type": {"video.failed"}})
		if p.Status != 303 {
			t.Fatalf("send a test event: %d", p.Status)
		}
		b.get(p.location()).contains(t, "A test event is on its way")
		testkit.Eventually(t, 10*time.Second, "the test event", func() bool { return len(rcv.deliveries()) == 1 })
		first := rcv.deliveries()[0]
		verify(first, secret)
		if !strings.Contains(string(first.Body), `"type":"video.failed"`) || !strings.Contains(string(first.Body), `"id":"video_test`) {
			t.Errorf("test event %s", first.Body)
		}
		testkit.Eventually(t, 10*time.Second, "the attempt listed", func() bool {
			return strings.Contains(b.get("/console/webhooks/"+id).Body, "delivered")
		})

		// Rotate: a new secret, shown once; both sign for 24 hours.
		rot := b.post("/console/webhooks/"+id, "/console/webhooks/"+id+"/rotate", url.Values{})
		newSecret := shownSecret(rot)
		if newSecret == "" || newSecret == secret {
			t.Fatalf("rotation showed %q", newSecret)
		}
		rot.contains(t, "keeps signing beside this one for 24 hours")
		b.post("/console/webhooks/"+id, "/console/webhooks/"+id+"/test", url.Values{"type": {"video.completed"}})
		testkit.Eventually(t, 10*time.Second, "the second test event", func() bool { return len(rcv.deliveries()) == 2 })
		second := rcv.deliveries()[1]
		if n := len(strings.Fields(second.Header.Get("webhook-signature"))); n != 2 {
			t.Errorf("%d signatures during the rotation, want 2", n)
		}
		verify(second, secret, newSecret)

		// Disabled: nothing is sent, and a video's event is not kept for it (as Stripe); a test event is
		// refused with a message. Enabled again, the next video's event goes out.
		if p := b.post("/console/webhooks/"+id, "/console/webhooks/"+id+"/disable", url.Values{}); p.Status != 303 {
			t.Fatalf("disable: %d", p.Status)
		}
		b.get("/console/webhooks/"+id).contains(t, "disabled in the console", "Enable")
		if p := b.post("/console/webhooks/"+id, "/console/webhooks/"+id+"/test", url.Values{"type": {"video.completed"}}); p.Status != 422 ||
			!strings.Contains(p.Body, "Enable it first") {
			t.Errorf("a test event to a disabled endpoint: %d", p.Status)
		}
		key := createKey(t, b, "hooks")
		var u models.User
		if err := s.DB.R.Where("email = ?", email).Take(&u).Error; err != nil {
			t.Fatal(err)
		}
		if err := creditUSD(s, u.AccountID, "5"); err != nil {
			t.Fatal(err)
		}
		unseen := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-720p", "prompt": "a lantern"})
		s.WaitStatus(t, key, unseen["id"].(string), 30*time.Second, "completed")
		b.post("/console/webhooks/"+id, "/console/webhooks/"+id+"/enable", url.Values{})
		v := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-720p", "prompt": "a second lantern"})
		s.WaitStatus(t, key, v["id"].(string), 30*time.Second, "completed")
		testkit.Eventually(t, 10*time.Second, "the video's event", func() bool { return len(rcv.deliveries()) == 3 })
		third := rcv.deliveries()[2]
		verify(third, newSecret)
		if !strings.Contains(string(third.Body), v["id"].(string)) {
			t.Errorf("the video's event: %s", third.Body)
		}
		var kept int64
		s.DB.R.Model(&models.WebhookEvent{}).Where("subject_id = ?", unseen["id"]).Count(&kept)
		if kept != 0 {
			t.Errorf("an event kept for a disabled endpoint")
		}

		// Resend: the same id and body, again.
		var d models.WebhookDelivery
		if err := s.DB.R.Joins("JOIN webhook_events e ON e.id = webhook_deliveries.event_id").
			Where("webhook_deliveries.endpoint_id = ? AND e.subject_id = ?", id, v["id"]).Take(&d).Error; err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "delivered", func() bool {
			var cur models.WebhookDelivery
			s.DB.R.Where("id = ?", d.ID).Take(&cur)
			return cur.DeliveredAt != nil
		})
		b.post("/console/webhooks/"+id, "/console/webhooks/"+id+"/deliveries/"+itoa(int(d.ID))+"/resend", url.Values{})
		testkit.Eventually(t, 10*time.Second, "the resend", func() bool { return len(rcv.deliveries()) == 4 })
		fourth := rcv.deliveries()[3]
		if fourth.Header.Get("webhook-id") != third.Header.Get("webhook-id") || string(fourth.Body) != string(third.Body) {
			t.Errorf("the resend is another message: %s %s", fourth.Header.Get("webhook-id"), fourth.Body)
		}
		// The deliveries name their video, linked to its page; test events are marked as tests.
		deliveries := b.get("/console/webhooks/" + id)
		deliveries.contains(t, `href="/console/tasks/`+v["id"].(string)+`"`, `<span class="badge test"`)
		deliveries.lacks(t, `href="/console/tasks/video_test`)

		// Another account cannot see or act on it.
		other := signUpVerified(t, s, "other-"+strings.ToLower(t.Name()[len(t.Name())-6:])+"@example.com")
		if p := other.get("/console/webhooks/" + id); p.Status != 404 {
			t.Errorf("another account's endpoint: %d", p.Status)
		}
		if p := other.post("/console/webhooks", "/console/webhooks/"+id+"/delete", url.Values{}); p.Status != 404 {
			t.Errorf("another account deleting it: %d", p.Status)
		}

		// Delete, after a confirmation page.
		b.get("/console/webhooks/"+id+"/delete").contains(t, "Delete this endpoint?")
		del := b.post("/console/webhooks/"+id+"/delete", "/console/webhooks/"+id+"/delete", url.Values{})
		if del.Status != 303 || !strings.Contains(del.location(), "webhook-deleted") {
			t.Fatalf("delete: %d %s", del.Status, del.location())
		}
		b.get("/console/webhooks").contains(t, "No endpoints yet")
		var left int64
		s.DB.R.Model(&models.WebhookDelivery{}).Where("endpoint_id = ?", id).Count(&left)
		if left != 0 {
			t.Errorf("%d deliveries left after delete", left)
		}
	})
}

// TestWebhookEndpointRefusals: what the add form refuses, each with its message beside the field and
// nothing saved — the import guard's refusals among them (docs/webhooks.md#what-an-endpoint-may-be) —
// and the limit of 10 endpoints.
func TestWebhookEndpointRefusals(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		rcv := &hookReceiver{}
		policy := testkit.ServeHTTPSHost(t, "hooks.example.com", rcv)
		// Names that resolve inside, as an attacker's DNS would make them.
		policy.Resolver = testkit.StartDNS(t, map[string][]netip.Addr{
			"hooks.example.com":    {policy.AllowPrefixes[0].Addr()},
			"private.example.com":  {netip.MustParseAddr("10.1.2.3")},
			"metadata.example.com": {netip.MustParseAddr("169.254.169.254")},
			"mixed.example.com":    {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("192.168.0.10")},
		})
		s := testkit.StartWith(t, dbURL, nil, server.Options{ImportPolicy: &policy})
		b := signUpVerified(t, s, "refusals-"+strings.ToLower(t.Name()[len(t.Name())-6:])+"@example.com")
		both := []string{"video.completed", "video.failed"}
		cases := []struct {
			name   string
			url    string
			events []string
			want   string
		}{
			{"empty", "", both, "Enter the URL"},
			{"plain http elsewhere", "http://hooks.example.com/in", both, "http:// is allowed only to this machine"},
			{"credentials", "https://user:pw@hooks.example.com/in", both, "user name or password"},
			{"private literal", "https://10.0.0.5/in", both, "private network address"},
			{"loopback literal", "https://127.0.0.1/in", both, "loopback address"},
			{"metadata literal", "https://169.254.169.254/latest", both, "metadata"},
			{"name resolving private", "https://private.example.com/in", both, "resolves to 10.1.2.3, a private network address"},
			{"name resolving to metadata", "https://metadata.example.com/in", both, "the cloud metadata address"},
			{"one address of several private", "https://mixed.example.com/in", both, "192.168.0.10"},
			{"another port", "https://hooks.example.com:8443/in", both, "port 8443 is not allowed"},
			{"not a URL", "hooks example", both, "cannot receive webhooks"},
			{"no events", "https://hooks.example.com/in", nil, "Choose at least one event"},
			{"unknown event", "https://hooks.example.com/in", []string{"video.started"}, `"video.started" is not an event type`},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p := b.submit("/console/webhooks", "url", url.Values{"url": {tc.url}, "events": tc.events})
				if p.Status != 422 || !strings.Contains(html.UnescapeString(p.Body), tc.want) || shownSecret(p) != "" {
					t.Errorf("%q: %d, want 422 with %q: %s", tc.url, p.Status, tc.want, trimPage(p.Body))
				}
			})
		}
		var n int64
		s.DB.R.Model(&models.WebhookEndpoint{}).Count(&n)
		if n != 0 {
			t.Fatalf("%d endpoints saved by refused forms", n)
		}
		// http:// to this machine is the development allowance (APP_ENV is development here).
		if p := b.submit("/console/webhooks", "url", url.Values{"url": {"http://localhost:3000/hooks"}, "events": both}); shownSecret(p) == "" {
			t.Errorf("http://localhost in development: %d %s", p.Status, trimPage(p.Body))
		}
		for i := 1; i < webhooks.MaxEndpoints; i++ {
			if p := b.submit("/console/webhooks", "url", url.Values{"url": {"https://hooks.example.com/" + itoa(i)}, "events": both}); shownSecret(p) == "" {
				t.Fatalf("endpoint %d: %d %s", i+1, p.Status, trimPage(p.Body))
			}
		}
		full := b.get("/console/webhooks")
		full.contains(t, "at most 10 endpoints")
		if p := b.post("/console/webhooks", "/console/webhooks", url.Values{"url": {"https://hooks.example.com/11"}, "events": both}); p.Status != 422 || !strings.Contains(p.Body, "at most 10 endpoints") {
			t.Errorf("an 11th endpoint: %d", p.Status)
		}
	})
}

// TestWebhookDeliveryGuard: the guard runs again on every delivery, against what the name resolves to
// then. An endpoint saved while its name resolved to the receiver, which now resolves to a private
// address (DNS rebinding), is not contacted: the attempt is recorded as refused, with the reason, and
// retried later. A redirect is not followed: the 3xx is the attempt's failure, and its target receives
// nothing.
func TestWebhookDeliveryGuard(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		rcv := &hookReceiver{}
		policy := testkit.ServeHTTPSHost(t, "hooks.example.com", rcv)
		recv := policy.AllowPrefixes[0].Addr()
		zone := testkit.StartDNSZone(t, map[string][]netip.Addr{"hooks.example.com": {recv}, "moving.example.com": {recv}})
		policy.Resolver = zone.Resolver()
		s := testkit.StartWith(t, dbURL, nil, server.Options{ImportPolicy: &policy})
		acct := s.NewAccount(t, "1")
		ctx := context.Background()

		moving, _, err := s.Webhooks.Add(ctx, acct.ID, "https://moving.example.com/in", webhooks.EventTypes)
		if err != nil {
			t.Fatal(err)
		}
		zone.Set("moving.example.com", netip.MustParseAddr("10.9.8.7"))
		if err := s.Webhooks.SendTest(ctx, acct.ID, moving.ID, webhooks.VideoCompleted); err != nil {
			t.Fatal(err)
		}
		var a models.WebhookAttempt
		testkit.Eventually(t, 10*time.Second, "the refused attempt", func() bool {
			return s.DB.R.Where("endpoint_id = ?", moving.ID).Take(&a).Error == nil
		})
		if a.Status != 0 || !strings.Contains(a.Error, "refused: moving.example.com resolves to 10.9.8.7, a private network address") {
			t.Errorf("attempt %+v", a)
		}
		if n := len(rcv.deliveries()); n != 0 {
			t.Errorf("the receiver got %d deliveries through a rebound name", n)
		}
		var d models.WebhookDelivery
		s.DB.R.Where("endpoint_id = ?", moving.ID).Take(&d)
		if d.NextAttemptAt == nil || d.DeliveredAt != nil {
			t.Errorf("the refused delivery is not retried: %+v", d)
		}

		// A redirect answered: not followed.
		rcv.mu.Lock()
		rcv.answer = func(d delivery) int { return http.StatusFound }
		rcv.mu.Unlock()
		redir, _, err := s.Webhooks.Add(ctx, acct.ID, "https://hooks.example.com/redirect", webhooks.EventTypes)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Webhooks.SendTest(ctx, acct.ID, redir.ID, webhooks.VideoCompleted); err != nil {
			t.Fatal(err)
		}
		var ra models.WebhookAttempt
		testkit.Eventually(t, 10*time.Second, "the redirected attempt", func() bool {
			return s.DB.R.Where("endpoint_id = ?", redir.ID).Take(&ra).Error == nil
		})
		testkit.Eventually(t, 10*time.Second, "the attempt recorded", func() bool { return len(rcv.deliveries()) >= 1 })
		if got := rcv.deliveries(); ra.Status != http.StatusFound || len(got) != 1 || got[0].Path != "/redirect" {
			t.Errorf("redirect attempt %+v, receiver %d", ra, len(rcv.deliveries()))
		}
		var rd models.WebhookDelivery
		s.DB.R.Where("endpoint_id = ?", redir.ID).Take(&rd)
		if rd.DeliveredAt != nil || rd.NextAttemptAt == nil {
			t.Errorf("a 302 counted as delivered: %+v", rd)
		}
	})
}

// TestStaffSeeWebhooks: support staff open an account's endpoints and an endpoint's deliveries from the
// account's pages, read-only (no form, no secret), and each look is in the audit log.
func TestStaffSeeWebhooks(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		rcv := &hookReceiver{}
		s, _ := startHooks(t, dbURL, nil, rcv)
		acct := s.NewAccount(t, "1")
		ep, secret, err := s.Webhooks.Add(context.Background(), acct.ID, "https://hooks.example.com/staff", webhooks.EventTypes)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Webhooks.SendTest(context.Background(), acct.ID, ep.ID, webhooks.VideoCompleted); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "the attempt", func() bool {
			var n int64
			s.DB.R.Model(&models.WebhookAttempt{}).Where("endpoint_id = ?", ep.ID).Count(&n)
			return n == 1
		})
		sup := signInStaff(t, s, "hooks-staff@example.com", models.RoleSupport)
		base := "/support/accounts/" + itoa(int(acct.ID))
		sup.get(base).contains(t, base+"/webhooks")
		list := sup.get(base + "/webhooks")
		list.contains(t, "https://hooks.example.com/staff", base+"/webhooks/"+ep.ID)
		list.lacks(t, "Add an endpoint", `name="url"`)
		detail := sup.get(base + "/webhooks/" + ep.ID)
		detail.contains(t, "video.completed", "delivered", ep.SecretHint)
		detail.lacks(t, secret, "Rotate secret", "Resend", "Send test event")
		var actions []string
		s.DB.R.Model(&models.AuditEntry{}).Where("actor = ? AND account_id = ?", sup.Email, acct.ID).Order("id").Pluck("action", &actions)
		n := 0
		for _, a := range actions {
			if a == "webhooks.view" {
				n++
			}
		}
		if n != 2 {
			t.Errorf("audit actions %v, want two webhooks.view", actions)
		}
		// Staff cannot act on a customer's endpoint through the console's forms: those are the customer's.
		if p := sup.post(base+"/webhooks/"+ep.ID, "/console/webhooks/"+ep.ID+"/delete", url.Values{}); p.Status != 404 {
			t.Errorf("staff deleting a customer's endpoint through the console: %d", p.Status)
		}
	})
}
