// Package views holds the templ components of the console's pages and of the e-mails, and the small
// helpers they share for times and money. Views receive plain data; they never query anything.
package views

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"videogen/internal/domain/members"
	"videogen/internal/domain/tasks"
	"videogen/internal/money"
	"videogen/models"
)

// Viewer is what every page knows about who is looking at it.
type Viewer struct {
	User     *models.User // nil when signed out
	Location *time.Location
	CSRF     string // token for the page's forms
	Active   string // the navigation entry of this page
	Notice   string // one-line message after a redirect ("API key revoked.")
	// TestTopups is set when the console may add test funds (TEST_TOPUPS=1).
	TestTopups bool
	// SelfTopup is set when a member can add funds themselves (card payments or test top-ups); else
	// support credits the wallet, at SupportEmail (SUPPORT_EMAIL; "" when the operator set none).
	SelfTopup    bool
	SupportEmail string
	// Refresh, when set, reloads the page without JavaScript (a meta refresh: "3;url=/…").
	Refresh string
	// Staff is set when a staff member looks at a tenant's page (its links then stay under /support).
	Staff *StaffContext
}

// Link is a path of the tenant's pages ("/tasks/video_…") under the console, or under the staff
// pages of that account when staff look at it.
func (v Viewer) Link(path string) string {
	if v.Staff != nil {
		return v.Staff.Base + path
	}
	return "/console" + path
}

// IsStaff reports whether the viewer is support or admin staff.
func (v Viewer) IsStaff() bool { return v.User != nil && v.User.Staff() }

// IsAdmin reports whether the viewer is an admin.
func (v Viewer) IsAdmin() bool { return v.User != nil && v.User.Role == models.RoleAdmin }

// Role is the signed-in member's role in their account ("" when signed out).
func (v Viewer) Role() string {
	if v.User == nil {
		return ""
	}
	return v.User.AccountRole
}

// Can reports whether the viewer may do the action in the account the page shows (members.Can): the
// page then offers its form. Staff looking at a tenant's pages never get the customer's forms.
func (v Viewer) Can(a members.Action) bool {
	return v.User != nil && v.Staff == nil && members.Can(v.User.AccountRole, a)
}

// SignedIn reports whether someone is signed in.
func (v Viewer) SignedIn() bool { return v.User != nil }

// When formats a time in the viewer's time zone, with the zone's name so it is never ambiguous.
func (v Viewer) When(t time.Time) string {
	loc := v.Location
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

// WhenPtr formats an optional time; "—" when unset.
func (v Viewer) WhenPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return v.When(*t)
}

// Zone names the viewer's time zone.
func (v Viewer) Zone() string {
	if v.Location == nil {
		return "UTC"
	}
	return v.Location.String()
}

// Money formats micro-dollars for people: "$12.30", or every decimal when not whole cents.
func Money(m int64) string { return money.Micros(m).USD() }

// SignedMoney formats a balance change with its sign: "+$25.00", "−$1.50".
func SignedMoney(m int64) string {
	if m > 0 {
		return "+" + Money(m)
	}
	if m < 0 {
		return "−" + Money(-m)
	}
	return Money(0)
}

// promptPreviewRunes is how much of a prompt a table row shows: enough to tell tasks apart at a glance.
const promptPreviewRunes = 60

// PromptPreview is a prompt cut to at most 60 characters, ending in "…" when cut. It counts runes, so a
// cut never splits a character.
func PromptPreview(p string) string {
	if !PromptCut(p) {
		return p
	}
	r := []rune(p)
	return strings.TrimRight(string(r[:promptPreviewRunes-1]), " ") + "…"
}

// PromptCut reports whether PromptPreview shortens a prompt.
func PromptCut(p string) bool { return utf8.RuneCountInString(p) > promptPreviewRunes }

// Itoa is strconv.Itoa for templates.
func Itoa(n int) string { return fmt.Sprint(n) }

// Int64 formats an int64 for templates.
func Int64(n int64) string { return fmt.Sprint(n) }

func BoolAttr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func F1(x float64) string { return fmt.Sprintf("%.1f", x) }

func Deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func BoolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// LedgerLabel names a ledger entry for people: as EntryLabel, and a refund of a cancelled video says so
// (its reason is the task's error code; rows written before that was kept read "video failed").
func LedgerLabel(e models.LedgerEntry) string {
	if e.Kind == models.KindRelease && e.Reason == tasks.CodeCancelled {
		return "Refunded (video cancelled)"
	}
	return EntryLabel(e.Kind)
}

// TaskState is a task's state as people read it: the API's status, except that a video stopped by its
// customer reads "cancelled" — the API keeps OpenAI's status "failed" with error.code "cancelled"
// (docs/console.md).
func TaskState(t *models.Task) string {
	if t.Status == tasks.Failed && t.ErrorCode != nil && *t.ErrorCode == tasks.CodeCancelled {
		return tasks.StateCancelled
	}
	return t.Status
}

// EntryLabel names a ledger entry kind for people.
func EntryLabel(kind string) string {
	switch kind {
	case models.KindTopup:
		return "Top-up (card)"
	case models.KindTestTopup:
		return "Test funds"
	case models.KindAdjustment:
		return "Adjustment by support"
	case models.KindReserve:
		return "Reserved for a video"
	case models.KindSettle:
		return "Charged for a video"
	case models.KindRelease:
		return "Refunded (video failed)"
	case models.KindRefund:
		return "Card payment refunded"
	case models.KindDispute:
		return "Card payment disputed"
	case models.KindDisputeWon:
		return "Dispute closed in your favour"
	}
	return kind
}

func KeyName(k models.APIKey) string {
	if k.Name == "" {
		return "Unnamed key"
	}
	return k.Name
}

// eventDetail is a task-log line as the viewer may see it: support staff see every detail of the upstream
// exchange (credential, idempotency key, instance); customers see what happened in plain words.
func EventDetail(e models.TaskEvent, staff bool) string {
	if staff {
		return e.Detail
	}
	switch {
	case e.ToStatus == tasks.Failed && e.FromStatus != tasks.Failed:
		// The failure's message, with what happened to the money, heads the page; the log names the code
		// rather than say it all twice.
		code, _, _ := strings.Cut(e.Detail, ": ")
		return "error code " + code
	case strings.Contains(e.Detail, "no clear answer"):
		return "the generation service did not answer clearly; retrying safely, without starting a second video"
	case strings.HasPrefix(e.Detail, "accepted upstream as "):
		return "accepted by the generation service"
	case strings.HasPrefix(e.Detail, "submission attempt "):
		n, _, _ := strings.Cut(strings.TrimPrefix(e.Detail, "submission attempt "), " ")
		return "sent to the generation service (attempt " + n + ")"
	case strings.HasPrefix(e.Detail, "returned to the queue: "):
		return "waiting for another generation slot (nothing was started or charged)"
	case strings.HasPrefix(e.Detail, "refused upstream: "):
		return "refused by the generation service"
	case strings.HasPrefix(e.Detail, "failed upstream: "):
		return "the generation service reported a failure"
	case strings.HasPrefix(e.Detail, "poll ") && strings.Contains(e.Detail, " failed ("):
		// What the upstream said is for staff; the customer learns that we keep asking, and when.
		_, next, _ := strings.Cut(e.Detail, "; next poll in ")
		return "the generation service did not answer a status check; asking again in " + next
	case strings.HasPrefix(e.Detail, "cancel asked by "):
		// What the provider said is for staff.
		who, rest, _ := strings.Cut(e.Detail, ": ")
		if strings.HasPrefix(rest, "not done") {
			return who + ": not done, it could not be stopped then"
		}
		return who + ": stopped by the generation service"
	case strings.HasPrefix(e.Detail, "deleted through the API by "):
		// Where the file was stored is ours to know.
		who, rest, _ := strings.Cut(e.Detail, "; ")
		if strings.HasPrefix(rest, "its stored video ") {
			return who + "; its stored video was removed"
		}
		return who
	case strings.HasPrefix(e.Detail, "seed not sent: ") || strings.HasPrefix(e.Detail, "generate_audio echoed true: "):
		// Which provider model it went to is ours to know.
		var said []string
		if strings.Contains(e.Detail, "seed not sent: ") {
			said = append(said, "the seed was not used: the provider of this video takes none, so the video's seed is null")
		}
		if strings.Contains(e.Detail, "generate_audio echoed true: ") {
			said = append(said, "this model renders sound whatever generate_audio asks, so the video says generate_audio true")
		}
		return strings.Join(said, "; ")
	case strings.HasPrefix(e.Detail, "the provider calls this failure passing"):
		return "the generation service filtered the video for a passing reason (its sound); trying once more, at no extra cost"
	case e.ToStatus == tasks.Completed && e.FromStatus != tasks.Completed:
		// What the video cost us upstream is ours to know.
		detail, _, _ := strings.Cut(e.Detail, "; upstream cost ")
		return detail
	}
	return e.Detail
}

// change formats a balance change, or "—" when the entry does not move that balance.
func Change(m int64) string {
	if m == 0 {
		return "—"
	}
	return SignedMoney(m)
}

// WithRefresh returns the viewer with a meta refresh for the page.
func (v Viewer) WithRefresh(r string) Viewer {
	v.Refresh = r
	return v
}

// plainUSD writes whole-cent micro-dollars as a form value: "25", "25.50".
func PlainUSD(m int64) string {
	s := strings.TrimPrefix(money.Micros(m).USD(), "$")
	return strings.TrimSuffix(s, ".00")
}

// topupAmount is what a top-up is worth: what Stripe collected once credited, else what was asked.
func TopupAmount(t models.Topup) int64 {
	if t.State == models.TopupCredited {
		return t.CreditedMicros
	}
	return t.AmountMicros
}

func FailureNote(f string) string {
	if f == "" {
		return ""
	}
	return " (" + strings.TrimSuffix(f, ".") + ")"
}

// StaffPage reports whether the page is one of the staff pages (its navigation is then the staff one).
func (v Viewer) StaffPage() bool { return v.Staff != nil || strings.HasPrefix(v.Active, "support") }

// describedBy is what a field's aria-describedby names: its error when it has one, else its hint.
func describedBy(id, hint, errMsg string) string {
	switch {
	case errMsg != "":
		return id + "-error"
	case hint != "":
		return id + "-hint"
	}
	return ""
}

// ThumbnailShown reports whether the task has a stored thumbnail to show (internal/domain/stills): finished,
// not deleted, and not past its retention (the janitor forgets the key then).
func ThumbnailShown(t *models.Task) bool {
	return t.Status == "completed" && t.ThumbnailKey != nil && t.DeletedAt == nil
}

// StaffContext is set when a staff member looks at a tenant's page: whose account it is, and where its
// pages are. The customer's own page components render it, with a banner saying whose data this is.
type StaffContext struct {
	Account    models.Account
	OwnerEmail string
	Base       string // "/support/accounts/{id}"
	Admin      bool   // the viewer may change things (admin forms are shown)
}

// Bar is one bar of the spend chart, in SVG units.
type Bar struct {
	X, Y, W, H float64
	Label      string
}

// BarsOf lays values out, left to right, as the bars of a chart drawn in a 600×170 SVG view box: the
// plot spans x 30–590 above the axis at y 140, the tallest bar 130 high, and a value above zero is never
// drawn flatter than 2. labels[i] names bar i (its tooltip).
func BarsOf(values []int64, labels []string) []Bar {
	var most int64 = 1
	for _, v := range values {
		most = max(most, v)
	}
	out := make([]Bar, 0, len(values))
	w := 560.0 / float64(max(len(values), 1))
	for i, v := range values {
		h := 130 * float64(max(v, 0)) / float64(most)
		if v > 0 {
			h = max(h, 2)
		}
		out = append(out, Bar{X: 30 + float64(i)*w + 1, Y: 140 - h, W: w - 2, H: h, Label: labels[i]})
	}
	return out
}

// HBar is one row of a horizontal bar chart (HBarsOf), in SVG units: its name and figure written on a
// line above its bar, which starts at x 0.
type HBar struct {
	TextY, BarY, W float64 // the text's baseline, the bar's top and its length
	Name, Figure   string  // written left and right above the bar; Name shortened to fit a phone
	Label          string  // the bar's tooltip: the whole name and the figure
}

// Horizontal bar charts are 600 units wide and HBarPitch high per row, each bar HBarHeight high: room
// for a 25-unit label above every bar, the size .chart text takes on a phone (legible at 390 px).
const (
	HBarPitch  = 52.0
	HBarHeight = 14.0
	hBarName   = 30 // runes of a name written beside its bar; the table has it whole
)

// HBarsOf lays values out top to bottom as the rows of a horizontal bar chart drawn in a 600-unit wide
// SVG view box, the longest bar 600 long and a value above zero never shorter than 2; names[i] and
// figures[i] are written above bar i. It returns the bars and the view box's height.
func HBarsOf(values []int64, names, figures []string) ([]HBar, float64) {
	var most int64 = 1
	for _, v := range values {
		most = max(most, v)
	}
	out := make([]HBar, 0, len(values))
	for i, v := range values {
		w := 600 * float64(max(v, 0)) / float64(most)
		if v > 0 {
			w = max(w, 2)
		}
		name := names[i]
		if r := []rune(name); len(r) > hBarName {
			name = string(r[:hBarName-1]) + "…"
		}
		top := float64(i) * HBarPitch
		out = append(out, HBar{TextY: top + 26, BarY: top + 32, W: w, Name: name, Figure: figures[i], Label: names[i] + ": " + figures[i]})
	}
	return out, float64(len(values))*HBarPitch + 4
}

// StatusClass names an HTTP status' class for the badge colour ("s2", "s4", "s5").
func StatusClass(status int) string { return fmt.Sprintf("s%d", status/100) }

// Latency formats microseconds as milliseconds.
func Latency(micros int64) string { return fmt.Sprintf("%.1f ms", float64(micros)/1000) }
