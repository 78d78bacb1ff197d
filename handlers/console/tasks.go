package console

import (
	"videogen/handlers/web"

	"errors"
	"net/url"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/audit"
	"videogen/internal/domain/catalog"
	"videogen/internal/domain/members"
	"videogen/internal/domain/tasks"
	"videogen/internal/domain/videos"
	"videogen/internal/refusal"
	"videogen/models"
	"videogen/views"
	"videogen/views/customer"
)

const consolePageSize = 25

// ShowTasks answers GET /console/tasks?status=&model=&after=.
func (h *Handler) ShowTasks(c *fiber.Ctx) error {
	who := web.TenantOf(c)
	if err := h.AuditTenantLook(c, audit.ViewTasks, "", ""); err != nil {
		return err
	}
	f := customer.TaskFilter{Status: c.Query("status"), Model: c.Query("model")}
	switch f.Status {
	case "", tasks.Queued, tasks.InProgress, tasks.Completed, tasks.Failed, tasks.StateCancelled:
	default:
		f.Status = ""
	}
	if _, ok := catalog.Lookup(f.Model); !ok {
		f.Model = ""
	}
	after := c.Query("after")
	// The console is the account's record: a task deleted through the API stays listed, marked deleted.
	page, err := h.Videos.List(c.UserContext(), who.AccountID, videos.ListParams{Limit: consolePageSize, After: after, Status: f.Status, Model: f.Model, WithDeleted: true})
	if _, bad := refusal.As(err); bad {
		return web.Redirect(c, who.Base+"/tasks") // a stale or edited cursor: start over
	}
	if err != nil {
		return err
	}
	p := customer.TasksPage{Tasks: page.Tasks, Filter: f, SearchedTo: page.SearchedTo}
	for _, m := range catalog.Models {
		p.Models = append(p.Models, m.ID)
	}
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Model != "" {
		q.Set("model", f.Model)
	}
	if after != "" {
		p.First = "?" + q.Encode()
	}
	if page.HasMore {
		q.Set("after", page.Next)
		p.Next = "?" + q.Encode()
	}
	return h.Render(c, customer.TasksList(h.TenantViewer(c, "tasks"), p))
}

// ShowTask answers GET /console/tasks/{id}: parameters, task log, ledger entries, the video.
func (h *Handler) ShowTask(c *fiber.Ctx) error {
	who := web.TenantOf(c)
	v := h.TenantViewer(c, "tasks")
	p, err := h.TaskPage(c, who.AccountID, c.Params("id"), who.Staff != nil, v.Location)
	if err != nil {
		return err
	}
	if err := h.AuditTenantLook(c, audit.ViewTask, audit.TargetTask, p.Task.ID); err != nil {
		return err
	}
	// The customer's own page offers Cancel while a cancel can succeed: before the task was sent, or
	// while its provider can stop it (Ark: while queued there; Veo: never); staff pages never do.
	p.CanCancel = v.Can(members.CancelTasks) && tasks.Cancellable(&p.Task) &&
		(p.Task.CredentialID == nil || h.MayCancel == nil || h.MayCancel(*p.Task.CredentialID, p.Task.Status))
	p.CancelProblem = cancelRefusals[c.Query("cancel")]
	p.CancelWhile = "queued" // a task not yet sent: whoever takes it decides, and the next page load says
	if p.Task.CredentialID != nil && h.MayCancel != nil && h.MayCancel(*p.Task.CredentialID, tasks.InProgress) {
		p.CancelWhile = "queued in_progress"
	}
	if c.Query("notice") == "cancelled" && p.Task.ErrorCode != nil && *p.Task.ErrorCode == tasks.CodeCancelled {
		p.Cancelled = true
	}
	return h.Render(c, customer.TaskDetail(v, *p))
}

// cancelTask answers POST /console/tasks/{id}/cancel, the task page's Cancel button: as DELETE
// /v1/videos/{id} cancels, but it never deletes a finished task. Done, it shows the page saying what
// was released; refused, the page again with why (409).
func (h *Handler) cancelTask(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	id := c.Params("id")
	_, err := h.Videos.Cancel(c.UserContext(), u.AccountID, id, "console user "+u.Email)
	page := "/console/tasks/" + id
	if r, ok := refusal.As(err); ok && r.Code == refusal.NotFound.Code {
		return fiber.ErrNotFound
	}
	switch why := videos.CancelRefusal(err); {
	case err == nil:
		return web.Redirect(c, page+"?notice=cancelled")
	case errors.Is(err, videos.ErrFinished):
		return web.Redirect(c, page+"?cancel=finished")
	case why != "":
		return web.Redirect(c, page+"?cancel="+why)
	}
	return err
}

// cancelRefusals word, on the task's page, why a cancel was not done (?cancel=…): a fixed table, so a
// link can put no other text there.
var cancelRefusals = map[string]string{
	"finished":                      "This video had already finished, so there was nothing to cancel.",
	videos.CancelRefusedStarted:     "Its provider has started generating it and cannot stop it now. It stays reserved and is charged only if it completes; if it fails, the reservation is released.",
	videos.CancelRefusedBusy:        "It was being sent to its provider, or checked with it, at that very moment, so nothing was changed. Try again in a few seconds.",
	videos.CancelRefusedUnreachable: "Its provider could not be reached to stop it, so nothing was changed. Try again in a few seconds.",
}

// TaskPage reads one of the account's tasks with its history; for staff, with what only staff see.
func (h *Handler) TaskPage(c *fiber.Ctx, accountID int64, id string, staff bool, loc *time.Location) (*customer.TaskPage, error) {
	ctx := c.UserContext()
	t, err := h.Videos.GetWithDeleted(ctx, accountID, id)
	if errors.Is(err, refusal.NotFound) {
		return nil, fiber.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	p := customer.TaskPage{Task: *t}
	p.Inputs, _ = t.StoredInputs() // unreadable inputs show as none; the page still helps
	// The customer sees their inputs through links signed now; staff see what there was, not the files.
	if p.Files, err = h.Media.TaskFiles(ctx, accountID, p.Inputs, !staff); err != nil {
		return nil, err
	}
	if p.Events, p.Entries, err = models.TaskHistory(ctx, h.DB.R, t.ID); err != nil {
		return nil, err
	}
	if err := models.LedgerWithMembers(ctx, h.DB.R, accountID, p.Entries); err != nil {
		return nil, err
	}
	if staff {
		st := &customer.StaffTask{Summary: tasks.Explain(*t, p.Entries, loc)}
		if t.CredentialID != nil {
			st.CredentialID = *t.CredentialID
			cred, err := models.Credential(ctx, h.DB.R, *t.CredentialID)
			if err != nil && !errors.Is(err, models.ErrNotFound) {
				return nil, err
			}
			if cred != nil {
				st.CredentialLabel, st.Provider = cred.Label, cred.Provider
			}
		}
		if st.Calls, err = models.TaskCalls(ctx, h.DB.R, t.AccountID, t.ID, 50); err != nil {
			return nil, err
		}
		p.Staff = st
	}
	return &p, nil
}

// streamTaskVideo answers GET /console/tasks/{id}/video: the MP4 for the signed-in owner, inline (for
// the player) or as a download; with ?variant=thumbnail or spritesheet, the still beside it (the task
// list's thumbnails).
func (h *Handler) streamTaskVideo(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	id := c.Params("id")
	content, err := h.Videos.OpenContent(c.UserContext(), u.AccountID, id, c.Query("variant"))
	if status, ae, ok := web.StatusOf(err); ok {
		c.Status(status)
		return h.Render(c, views.ErrorPage(h.Viewer(c, "tasks"), status, "Video not available", ae.Message))
	}
	if err != nil {
		return err
	}
	disposition := "inline"
	if c.Query("download") != "" {
		disposition = "attachment"
	}
	c.Set(fiber.HeaderContentType, content.ContentType)
	c.Set(fiber.HeaderContentDisposition, disposition+`; filename="`+id+content.Ext+`"`)
	c.Set(fiber.HeaderCacheControl, "private, max-age=300")
	// The player seeks with Range requests (Safari will not play without them). The API itself
	// answers whole files only, as its contract says.
	return web.ServeRanges(c, content.Body, content.Size)
}
