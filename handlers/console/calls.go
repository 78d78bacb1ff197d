package console

import (
	"videogen/handlers/web"

	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/audit"
	"videogen/internal/money"
	"videogen/models"
	"videogen/views"
	"videogen/views/customer"
)

// keyPrefixRE is the shape of a key's display prefix; anything else is no key filter.
var keyPrefixRE = regexp.MustCompile(`^vg_[0-9A-Za-z]{8}$`)

const localTimeForm = "2006-01-02T15:04" // <input type="datetime-local">

// callQuery reads the call-log filters; times are typed in the viewer's time zone.
func (h *Handler) callQuery(c *fiber.Ctx, v views.Viewer) (models.CallQuery, customer.CallFilter, string) {
	f := customer.CallFilter{From: c.Query("from"), To: c.Query("to"), Class: c.Query("class"), Key: c.Query("key"), Path: web.LogText(c.Query("path"), 200)}
	if !keyPrefixRE.MatchString(f.Key) {
		f.Key = ""
	}
	q := models.CallQuery{AccountID: web.TenantOf(c).AccountID, KeyPrefix: f.Key, PathContains: f.Path}
	var problem string
	q.From, q.To, problem = TimeRange(f.From, f.To, v.Location)
	switch f.Class {
	case "2xx", "4xx", "5xx":
		q.StatusClass = int(f.Class[0] - '0')
	default:
		f.Class = ""
	}
	return q, f, problem
}

// TimeRange reads a from–to filter typed in the viewer's time zone (<input type="datetime-local">); a
// bound that is not a time is left open, and problem says so.
func TimeRange(from, to string, loc *time.Location) (f, t *time.Time, problem string) {
	read := func(text, name string) *time.Time {
		if text == "" {
			return nil
		}
		at, err := time.ParseInLocation(localTimeForm, text, loc)
		if err != nil {
			problem = name + " is not a date and time; it was ignored."
			return nil
		}
		u := at.UTC()
		return &u
	}
	return read(from, "From"), read(to, "To"), problem
}

// filterValues is the query string that reproduces a call-log filter (for page and export links).
func filterValues(f customer.CallFilter) url.Values {
	out := url.Values{}
	for k, v := range map[string]string{"from": f.From, "to": f.To, "class": f.Class, "key": f.Key, "path": f.Path} {
		if v != "" {
			out.Set(k, v)
		}
	}
	return out
}

// callsPageSize is how many calls a page of the call log lists.
const callsPageSize = 50

// ShowCalls answers GET /console/calls: the filtered call log, newest first, a page at a time.
func (h *Handler) ShowCalls(c *fiber.Ctx) error {
	v := h.TenantViewer(c, "calls")
	q, f, problem := h.callQuery(c, v)
	if err := h.AuditTenantLook(c, audit.ViewCalls, "", ""); err != nil {
		return err
	}
	var after *models.CallCursor
	if cur := c.Query("after"); cur != "" {
		micros, id, ok := strings.Cut(cur, "-")
		us, err1 := strconv.ParseInt(micros, 10, 64)
		n, err2 := strconv.ParseInt(id, 10, 64)
		if ok && err1 == nil && err2 == nil {
			after = &models.CallCursor{At: time.UnixMicro(us).UTC(), ID: n}
		}
	}
	rows, next, err := models.CallsPage(c.UserContext(), h.DB.R, q, after, callsPageSize)
	if err != nil {
		return err
	}
	if err := models.CallsWithMembers(c.UserContext(), h.DB.R, q.AccountID, rows); err != nil {
		return err
	}
	keys, err := models.AccountKeys(c.UserContext(), h.DB.R, q.AccountID)
	if err != nil {
		return err
	}
	p := customer.CallsPage{Rows: rows, Filter: f, Keys: keys, Error: problem}
	vals := filterValues(f)
	p.CSV = v.Link("/calls.csv?" + vals.Encode())
	if after != nil {
		p.First = "?" + vals.Encode()
	}
	if next != nil {
		vals.Set("after", fmt.Sprintf("%d-%d", next.At.UnixMicro(), next.ID))
		p.Next = "?" + vals.Encode()
		// A filter that matched less than a page among the calls one page may read: say how far back this
		// page looked, so an empty or short page with an Older link reads as what it is.
		if len(rows) < callsPageSize {
			searched := next.At
			p.SearchedTo = &searched
		}
	}
	return h.Render(c, customer.CallsList(v, p))
}

// Exports are bounded: a few at once per account, a time limit, and batches that each release their
// database connection, so a client that reads slowly (or never) holds nothing but its own goroutine.
const (
	exportBatch         = 1000
	exportTimeout       = 10 * time.Minute
	exportsPerAccount   = 2
	exportStoppedMarker = "# export stopped early; download it again"
)

// ExportCalls answers GET /console/calls.csv: the whole filtered range as CSV, streamed batch by batch.
func (h *Handler) ExportCalls(c *fiber.Ctx) error {
	v := h.TenantViewer(c, "calls")
	q, _, _ := h.callQuery(c, v)
	if !h.startExport(q.AccountID) {
		c.Status(fiber.StatusTooManyRequests)
		c.Set(fiber.HeaderRetryAfter, "30")
		return h.Render(c, views.ErrorPage(v, 429, "An export is already running",
			"Wait for your running exports to finish, then download again."))
	}
	// Recorded once the export is sure to run, so a refused one leaves no row.
	if err := h.AuditTenantLook(c, audit.Export, "", ""); err != nil {
		h.endExport(q.AccountID)
		return err
	}
	loc := v.Location
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="videogen-calls.csv"`)
	r, log := h.DB.R, h.Log
	// The writer runs after this handler returns, so it gets copies, never the request's context.
	c.Context().SetBodyStreamWriter(func(bw *bufio.Writer) {
		defer h.endExport(q.AccountID)
		ctx, cancel := context.WithTimeout(context.Background(), exportTimeout)
		defer cancel()
		w := csv.NewWriter(bw)
		_ = w.Write([]string{"time", "request_id", "method", "path", "status", "error_code", "key_prefix", "task_id", "amount_reserved_usd", "latency_ms", "bytes_in", "error_message"})
		var after *models.CallCursor
		for {
			rows, next, err := models.CallsPage(ctx, r, q, after, exportBatch)
			if err != nil {
				log.Error("call-log export", "account", q.AccountID, "err", err)
				_ = w.Write([]string{exportStoppedMarker})
				break
			}
			for _, row := range rows {
				_ = w.Write([]string{row.At.In(loc).Format(time.RFC3339Nano), row.RequestID, row.Method, csvSafe(row.Path), strconv.Itoa(row.Status),
					row.ErrorCode, row.KeyPrefix, row.TaskID, money.Micros(row.AmountReservedMicros).String(),
					fmt.Sprintf("%.3f", float64(row.LatencyMicros)/1000), strconv.FormatInt(row.BytesIn, 10), csvSafe(row.ErrorMessage)})
			}
			w.Flush()
			if err := bw.Flush(); err != nil || next == nil {
				break // done, or the client went away
			}
			after = next
		}
		w.Flush()
		_ = bw.Flush()
	})
	return nil
}

func (h *Handler) startExport(accountID int64) bool {
	h.exportsMu.Lock()
	defer h.exportsMu.Unlock()
	if h.exports == nil {
		h.exports = map[int64]int{}
	}
	if h.exports[accountID] >= exportsPerAccount {
		return false
	}
	h.exports[accountID]++
	return true
}

func (h *Handler) endExport(accountID int64) {
	h.exportsMu.Lock()
	defer h.exportsMu.Unlock()
	if h.exports[accountID]--; h.exports[accountID] <= 0 {
		delete(h.exports, accountID)
	}
}

// csvSafe keeps a spreadsheet from running a cell that starts like a formula (CSV injection).
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
