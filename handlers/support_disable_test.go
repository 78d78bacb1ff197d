package handlers_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestDisabledAccountTakesNothingNew: once an admin disables an account, another instance that still
// holds the account's key in its cache refuses a create with 401 account_disabled and writes nothing;
// and a user of the account who confirms their address afterwards is not signed in by it.
func TestDisabledAccountTakesNothingNew(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		a := testkit.Start(t, dbURL, nil)
		// The other instance caches keys for a minute, so only the database can refuse. Either instance's
		// outbox may send an e-mail: b's go to a's recorder too, with a's links.
		b := testkit.StartWith(t, dbURL, map[string]string{"API_KEY_CACHE_TTL": "1m", "WORKERS": "false", "PUBLIC_BASE_URL": a.URL},
			server.Options{Mail: a.Mails})
		acct := a.NewAccount(t, "10")
		if r := b.Do(t, "GET", "/v1/models", acct.Key, nil); r.Status != 200 {
			t.Fatalf("warming the other instance's cache: %d", r.Status)
		}
		// A second user of the account signs up and has not confirmed their address yet.
		late := newBrowser(t, a)
		late.post("/signup", "/signup", url.Values{"email": {"late@example.com"}, "password": {"paper-boats-float-42"}, "terms": {"yes"}})
		link := mailedLink(t, a, "late@example.com")
		if err := a.DB.W.Model(&models.User{}).Where("email = ?", "late@example.com").Update("account_id", acct.ID).Error; err != nil {
			t.Fatal(err)
		}

		adm := signInStaff(t, a, "boss@example.com", models.RoleAdmin)
		base := fmt.Sprintf("/support/accounts/%d", acct.ID)
		if p := adm.post(base, base+"/disable", url.Values{"reason": {"chargeback fraud"}, "confirm": {"yes"}}); p.Status != 303 {
			t.Fatalf("disable: %d %s", p.Status, trimPage(p.Body))
		}

		r := b.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "slipped through?"})
		if r.Status != 401 || r.ErrorCode() != "account_disabled" {
			t.Fatalf("a create on the instance with the cached key: %d %s", r.Status, r.Body)
		}
		var tasks int64
		a.DB.R.Model(&models.Task{}).Where("account_id = ?", acct.ID).Count(&tasks)
		if tasks != 0 {
			t.Fatalf("%d tasks written for a disabled account", tasks)
		}

		late.get(link).contains(t, "Confirm my e-mail address")
		late.post(link, "/verify", url.Values{"token": {link[strings.Index(link, "token=")+6:]}})
		if home := late.get("/console"); home.Status != 303 || !strings.HasPrefix(home.location(), "/signin") {
			t.Fatalf("confirming an address of a disabled account signed in: /console answers %d", home.Status)
		}
		testkit.CheckLedger(t, a.DB)
	})
}
