package console

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/audit"
	"videogen/models"
	"videogen/views/customer"
)

// ShowCall answers GET /console/calls/{request}: one call of the account's with its key, member, error
// message, task and the money it moved (docs/console.md, "A call's page"). Staff see it under
// /support/accounts/{id}/calls/{request}, audited. Another account's call, or none, is the 404 of a
// missing page.
func (h *Handler) ShowCall(c *fiber.Ctx) error {
	who := web.TenantOf(c)
	v := h.TenantViewer(c, "calls")
	ctx := c.UserContext()
	call, err := models.CallByRequestID(ctx, h.DB.R, c.Params("request"))
	if errors.Is(err, models.ErrNotFound) || (err == nil && (call.AccountID == nil || *call.AccountID != who.AccountID)) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	if err := h.AuditTenantLook(c, audit.ViewCall, audit.TargetCall, call.RequestID); err != nil {
		return err
	}
	rows := []models.CallLog{*call}
	if err := models.CallsWithMembers(ctx, h.DB.R, who.AccountID, rows); err != nil {
		return err
	}
	p := customer.CallPage{Call: rows[0]}
	if call.KeyPrefix != "" {
		keys, err := models.AccountKeys(ctx, h.DB.R, who.AccountID)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if k.Prefix == call.KeyPrefix {
				p.KeyName = k.Name
			}
		}
	}
	if call.TaskID != "" {
		p.Task, err = h.TaskPage(c, who.AccountID, call.TaskID, who.Staff != nil, v.Location)
		if err != nil && !errors.Is(err, fiber.ErrNotFound) {
			return err
		}
		// A read moves no money, even when the worker settled the task while it was being answered.
		if p.Task != nil && call.Method != fiber.MethodGet && call.Method != fiber.MethodHead {
			p.Moved = movedBy(*call, p.Task.Entries)
		}
	}
	return h.Render(c, customer.CallDetail(v, p))
}

// movedBy picks the task's ledger entries that the call wrote: those made while it was being answered.
// A call writes its money in its own transaction (a create's reservation, a cancel's release), between
// its start and its answer; the millisecond of slack covers the row's microsecond rounding.
func movedBy(call models.CallLog, entries []models.LedgerEntry) []models.LedgerEntry {
	from := call.At.Add(-time.Millisecond)
	to := call.At.Add(time.Duration(call.LatencyMicros)*time.Microsecond + time.Millisecond)
	var out []models.LedgerEntry
	for _, e := range entries {
		if !e.CreatedAt.Before(from) && !e.CreatedAt.After(to) {
			out = append(out, e)
		}
	}
	return out
}
