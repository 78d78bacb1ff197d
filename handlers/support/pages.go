package support

import (
	"videogen/handlers/console"

	"videogen/handlers/web"

	"errors"
	"net/url"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/audit"
	"videogen/internal/staff/staffsearch"
	"videogen/models"
	"videogen/views/staff"
)

// searchPageSize is how many users a search by part of an address lists a page.
const searchPageSize = 25

// searchStaff answers GET /support/search?q=: one box for any part of an e-mail address (a name, a
// domain), an account id, a key prefix, a task, media or request id; exactly one match opens it. Users
// are listed searchPageSize at a time in address order, the next page after ?after= (the last address
// shown).
func (h *handler) searchStaff(c *fiber.Ctx) error {
	v := h.Viewer(c, "support-search")
	after := web.LogText(c.Query("after"), 254)
	found, err := staffsearch.Find(c.UserContext(), h.DB.R, c.Query("q"), staffsearch.Page{After: after, Limit: searchPageSize})
	switch {
	case errors.Is(err, staffsearch.ErrEmpty):
		return h.Render(c, staff.SearchView(v, staff.SearchPage{Hint: "Paste what the customer gave you: their e-mail address, " +
			"an account id, an API key prefix (vg_ and 8 characters — never ask for a whole key), a video id, a file id, or the X-Request-Id of a call."}))
	case errors.Is(err, staffsearch.ErrUnsearchable):
		c.Status(fiber.StatusBadRequest)
		return h.Render(c, staff.SearchView(v, staff.SearchPage{Error: "Nothing was searched: what you pasted holds an invisible " +
			"control character (such as a NUL byte or a line break inside it). Type or paste it again as plain text."}))
	case err != nil:
		return err
	}
	// The term is recorded as it was read: a whole API key pasted by mistake is kept as its prefix only.
	if err := h.AuditLook(c, audit.Entry{Action: audit.Search, Detail: found.Term, TargetType: "query"}); err != nil {
		return err
	}
	if len(found.Matches) == 1 && after == "" && found.Next == "" {
		return web.Redirect(c, found.Matches[0].Href)
	}
	p := staff.SearchPage{Query: found.Term, Hint: found.Hint}
	if after != "" {
		p.First = "/support/search?" + url.Values{"q": {found.Term}}.Encode()
	}
	if found.Next != "" {
		p.Next = "/support/search?" + url.Values{"q": {found.Term}, "after": {found.Next}}.Encode()
	}
	for _, m := range found.Matches {
		p.Results = append(p.Results, staff.SearchResult{Kind: m.Kind, Label: m.Label, Href: m.Href, Note: m.Note})
	}
	if len(p.Results) == 0 && p.Hint == "" {
		p.Hint = "Nothing matches. Check for a typo, or try the customer's e-mail address, which finds their account."
	}
	return h.Render(c, staff.SearchView(v, p))
}

// showStaffAccount answers GET /support/accounts/{account}: who the account is, its balances, keys, and
// the latest of its tasks, ledger and calls, with links to the whole of each.
func (h *handler) showStaffAccount(c *fiber.Ctx) error {
	t := web.TenantOf(c)
	ctx := c.UserContext()
	if err := h.AuditTenantLook(c, audit.ViewAccount, "", ""); err != nil {
		return err
	}
	p := staff.StaffAccountPage{Account: t.Staff.Account}
	var err error
	if p.Users, err = models.AccountUsers(ctx, h.DB.R, t.AccountID); err != nil {
		return err
	}
	if p.Invitations, err = models.PendingInvitations(ctx, h.DB.R, t.AccountID, h.Now()); err != nil {
		return err
	}
	if p.Keys, err = models.AccountKeys(ctx, h.DB.R, t.AccountID); err != nil {
		return err
	}
	if p.Tasks, err = models.RecentTasks(ctx, h.DB.R, t.AccountID, 10); err != nil {
		return err
	}
	if p.Entries, _, err = models.LedgerPage(ctx, h.DB.R, t.AccountID, 0, 10); err != nil {
		return err
	}
	if p.Calls, _, err = models.CallsPage(ctx, h.DB.R, models.CallQuery{AccountID: t.AccountID}, nil, 10); err != nil {
		return err
	}
	if p.Topups, err = h.Payments.Topups(ctx, t.AccountID, 10); err != nil {
		return err
	}
	return h.Render(c, staff.StaffAccountView(h.TenantViewer(c, "account"), p))
}

// showStaffLedger answers GET /support/accounts/{account}/ledger: the whole ledger, 50 entries a page,
// with the balance after each (the customer sees the same entries on their wallet page).
func (h *handler) showStaffLedger(c *fiber.Ctx) error {
	t := web.TenantOf(c)
	if err := h.AuditTenantLook(c, audit.ViewLedger, "", ""); err != nil {
		return err
	}
	before, _ := strconv.ParseInt(c.Query("before"), 10, 64)
	entries, more, err := models.LedgerPage(c.UserContext(), h.DB.R, t.AccountID, before, 50)
	if err != nil {
		return err
	}
	p := staff.StaffLedgerPage{Entries: entries}
	if before > 0 {
		p.First = "?"
	}
	if more {
		p.Next = "?before=" + strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	return h.Render(c, staff.StaffLedgerView(h.TenantViewer(c, "ledger"), p))
}

// showStaffCall answers GET /support/calls/{request}: the one API call with that X-Request-Id. A call of
// an account is that account's call page (the customer's own page, with the staff banner, audited as
// every staff look; also at /support/accounts/{id}/calls/{request}); a call of none (no valid key) is
// shown here with what is known of it.
func (h *handler) showStaffCall(c *fiber.Ctx) error {
	rid := c.Params("request")
	call, err := models.CallByRequestID(c.UserContext(), h.DB.R, rid)
	if errors.Is(err, models.ErrNotFound) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	if call.AccountID != nil {
		if err := h.enterTenant(c, *call.AccountID); err != nil {
			return err
		}
		return h.ShowCall(c)
	}
	if err := h.AuditLook(c, audit.Entry{Action: audit.ViewCall, TargetType: audit.TargetCall, TargetID: call.RequestID}); err != nil {
		return err
	}
	v := h.Viewer(c, "support-search")
	return h.Render(c, staff.StaffCallView(v, staff.StaffCallPage{Call: *call}))
}

// showStaffTask answers GET /support/tasks/{id}: the task's page under its account.
func (h *handler) showStaffTask(c *fiber.Ctx) error {
	accountID, err := models.TaskAccount(c.UserContext(), h.DB.R, c.Params("id"))
	if errors.Is(err, models.ErrNotFound) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	return web.Redirect(c, "/support/accounts/"+strconv.FormatInt(accountID, 10)+"/tasks/"+c.Params("id"))
}

// showAuditLog answers GET /support/audit (admins): the audit log, filtered, newest first.
func (h *handler) showAuditLog(c *fiber.Ctx) error {
	v := h.Viewer(c, "support-audit")
	f := staff.AuditFilter{Actor: web.LogText(c.Query("actor"), 254), Action: web.LogText(c.Query("action"), 60),
		Account: c.Query("account"), From: c.Query("from"), To: c.Query("to")}
	q := audit.Filter{Actor: f.Actor, Action: f.Action}
	p := staff.AuditPage{}
	if f.Account != "" {
		if id, err := strconv.ParseInt(f.Account, 10, 64); err == nil && id > 0 {
			q.AccountID = id
		} else {
			p.Error = "Account id is a number; it was ignored."
			f.Account = ""
		}
	}
	var problem string
	if q.From, q.To, problem = console.TimeRange(f.From, f.To, v.Location); problem != "" {
		p.Error = problem
	}
	before, _ := strconv.ParseInt(c.Query("before"), 10, 64)
	rows, more, err := audit.Page(c.UserContext(), h.DB.R, q, before, 50)
	if err != nil {
		return err
	}
	p.Rows, p.Filter = rows, f
	vals := auditValues(f)
	if before > 0 {
		p.First = "?" + vals.Encode()
	}
	if more {
		vals.Set("before", strconv.FormatInt(rows[len(rows)-1].ID, 10))
		p.Next = "?" + vals.Encode()
	}
	return h.Render(c, staff.AuditLogView(v, p))
}

// auditValues is the query string that reproduces an audit-log filter (for page links).
func auditValues(f staff.AuditFilter) url.Values {
	out := url.Values{}
	for k, v := range map[string]string{"actor": f.Actor, "action": f.Action, "account": f.Account, "from": f.From, "to": f.To} {
		if v != "" {
			out.Set(k, v)
		}
	}
	return out
}
