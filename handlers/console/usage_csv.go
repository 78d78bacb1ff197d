package console

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/usage"
	"videogen/internal/money"
	"videogen/views/customer"
)

// exportUsage answers GET /console/usage.csv: the rows of the Usage page for the same query (from, to,
// group), one per day, model or key, with exact amounts. A report holds at most a row per day of a year,
// so it is read whole and sent at once; the headers are the call-log export's.
func (h *Handler) exportUsage(c *fiber.Ctx) error {
	p, _, err := h.usageQuery(c)
	if err != nil {
		return err
	}
	if p.Errors != nil {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.Render(c, customer.UsageView(h.Viewer(c, "usage"), p))
	}
	r := p.Report
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	head := []string{"day"}
	switch r.Group {
	case usage.ByModel:
		head = []string{"model"}
	case usage.ByKey:
		head = []string{"key_name", "key_prefix"}
	}
	_ = w.Write(append(head, "videos", "completed", "failed", "cancelled", "running", "seconds", "spend_usd", "reserved_usd"))
	for _, row := range r.Rows {
		var cells []string
		switch r.Group {
		case usage.ByDay:
			cells = []string{row.Day.Format(time.DateOnly)}
		case usage.ByModel:
			cells = []string{row.Model}
		case usage.ByKey:
			cells = []string{csvSafe(row.Label(r.Group)), row.KeyPrefix}
		}
		_ = w.Write(append(cells, strconv.FormatInt(row.Videos, 10), strconv.FormatInt(row.Completed, 10), strconv.FormatInt(row.Failed, 10), strconv.FormatInt(row.Cancelled, 10),
			strconv.FormatInt(row.Running(), 10), strconv.FormatInt(row.Seconds, 10), money.Micros(row.SpentMicros).String(), money.Micros(row.ReservedMicros).String()))
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	from, to, group := r.Values()
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="videogen-usage-%s-%s-per-%s.csv"`, from, to, group))
	return c.Send(buf.Bytes())
}
