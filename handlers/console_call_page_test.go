package handlers_test

import (
	"encoding/csv"
	"fmt"
	"html"
	"strings"
	"testing"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestCallPage: a request id in the call log opens the call's own page — method, path, status, latency,
// key (prefix and name), the member who made the key, the error's code and message, the task with its
// log, and the money the call moved (a create's reservation, a cancel's release) — in the viewer's zone;
// the same page for staff, audited; another account's call is a 404. Call log rows show ids shortened,
// the whole value in a title and a copy button.
func TestCallPage(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "cora@example.com")
		addFunds(t, b, "10")
		key := createKey(t, b, "render farm")

		bad := s.Do(t, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "p", "seconds": "99"})
		if bad.Status != 400 {
			t.Fatalf("refused create: %d %s", bad.Status, bad.Body)
		}
		badID := bad.Header.Get("X-Request-Id")
		msg, _ := bad.JSON(t)["error"].(map[string]any)["message"].(string)
		create := s.Do(t, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "logged"})
		if create.Status != 200 {
			t.Fatalf("create: %d %s", create.Status, create.Body)
		}
		createID, task := create.Header.Get("X-Request-Id"), create.JSON(t)["id"].(string)
		cancel := s.Do(t, "DELETE", "/v1/videos/"+task, key, nil)
		if cancel.Status != 200 {
			t.Fatalf("cancel: %d %s", cancel.Status, cancel.Body)
		}
		cancelID := cancel.Header.Get("X-Request-Id")
		for _, rid := range []string{badID, createID, cancelID} {
			waitCall(t, s, rid)
		}

		// The refusal: its code and its message as the client read it.
		p := b.get("/console/calls/" + badID)
		if p.Status != 200 {
			t.Fatalf("call page: %d", p.Status)
		}
		p.contains(t, badID, "POST /v1/videos", `<span class="badge s4">400</span> <code>`+bad.ErrorCode()+`</code>`, html.EscapeString(msg), key[:11]+"…", "render farm",
			"cora@example.com", " ms", "None: this call reserved, charged and released nothing.", "Times are in")
		if msg == "" {
			t.Fatal("the refusal had no message")
		}
		p.lacks(t, key)

		// The create: its task, the reservation it made, the task's log.
		p = b.get("/console/calls/" + createID)
		p.contains(t, `<span class="badge s2">200</span>`, `href="/console/tasks/`+task+`"`, "Money moved by this call", "$0.20", "The task's log", "cancelled")
		moved := between(p.Body, "Money moved by this call", "The task")
		if !strings.Contains(moved, "$0.20") || strings.Contains(moved, "Refunded") || strings.Count(moved, `<td class="head">`) != 1 {
			t.Errorf("the create's money: %s", trimPage(moved))
		}
		// The cancel: the release it made, not the reservation.
		p = b.get("/console/calls/" + cancelID)
		moved = between(p.Body, "Money moved by this call", "The task")
		if !strings.Contains(moved, "Refunded (video cancelled)") || strings.Count(moved, `<td class="head">`) != 1 {
			t.Errorf("the cancel's money: %s", trimPage(moved))
		}

		// The list links each call and shows its id shortened, the whole one in a title and a copy button.
		list := b.get("/console/calls")
		list.contains(t, `href="/console/calls/`+createID+`"`, `title="`+createID+`"`, `data-copy-text="`+createID+`"`, "req_…"+createID[len(createID)-6:])
		if strings.Contains(visibleText(list.Body), createID) {
			t.Error("the call log shows a whole request id in its text")
		}

		// The export carries the message too, last.
		rows, err := csv.NewReader(strings.NewReader(b.get("/console/calls.csv?class=4xx").Body)).ReadAll()
		if err != nil || len(rows) != 2 || rows[0][len(rows[0])-1] != "error_message" || rows[1][len(rows[1])-1] != msg {
			t.Errorf("the 4xx export: %v %q", err, rows)
		}

		// Another account's call, or none: a 404.
		other := signUpVerified(t, s, "otto@example.com")
		for _, rid := range []string{createID, "req_doesnotexist"} {
			if got := other.get("/console/calls/" + rid); got.Status != 404 {
				t.Errorf("%s opened by another account: %d", rid, got.Status)
			}
		}

		// Staff: the same page under the account, and from a pasted request id; each look audited.
		var acct models.User
		s.DB.R.Where("email = ?", "cora@example.com").Take(&acct)
		sup := signInStaff(t, s, "helpdesk@example.com", models.RoleSupport)
		for _, path := range []string{fmt.Sprintf("/support/accounts/%d/calls/%s", acct.AccountID, createID), "/support/calls/" + createID} {
			p := sup.get(path)
			if p.Status != 200 {
				t.Fatalf("%s: %d", path, p.Status)
			}
			p.contains(t, createID, "$0.20", fmt.Sprintf(`href="/support/accounts/%d/tasks/%s"`, acct.AccountID, task), "What happened")
		}
		if p := sup.get(fmt.Sprintf("/support/accounts/%d/calls/%s", acct.AccountID+1000, createID)); p.Status != 404 {
			t.Errorf("a call under another account's staff pages: %d", p.Status)
		}
		var n int64
		s.DB.R.Model(&models.AuditEntry{}).Where("action = ? AND target_id = ? AND account_id = ?", "call.view", createID, acct.AccountID).Count(&n)
		if n != 2 {
			t.Errorf("the staff looks at the call were audited %d times, want 2", n)
		}
	})
}

// between is the part of s after the first from and before the next to (all of the rest without one).
func between(s, from, to string) string {
	_, after, _ := strings.Cut(s, from)
	before, _, _ := strings.Cut(after, to)
	return before
}
