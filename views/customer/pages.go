package customer

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/media"
	"videogen/internal/money"
	"videogen/models"
	"videogen/views"
)

// DaySpend is what an account was charged on one day (in the viewer's time zone).
type DaySpend struct {
	Day    time.Time
	Micros int64
}

// Dashboard is the console's first page.
type Dashboard struct {
	Available, Reserved int64
	Spend               []DaySpend // the last 30 days, oldest first
	Recent              []models.Task
	Funded, HasKey      bool
	HasTask             bool
	BaseURL             string
	// Zone is the account's time zone's name, the one the chart's days are counted in (as on the Usage
	// page and the statements).
	Zone string
}

// FirstCurl is the dashboard's ready-made first request: a shell command over several lines, with the
// key from VIDEOGEN_API_KEY (the name the README, the docs and `videogen generate` use).
func FirstCurl(base string) string {
	return "curl " + base + "/v1/videos \\\n" +
		"  -H \"Authorization: Bearer $VIDEOGEN_API_KEY\" \\\n" +
		"  -H \"Content-Type: application/json\" \\\n" +
		"  -d '{\"model\": \"videogen-2.0-mini-480p\", \"prompt\": \"a paper boat on a rainy street\"}'"
}

// SpendTotal is the sum of the chart.
func (d Dashboard) SpendTotal() int64 {
	var t int64
	for _, s := range d.Spend {
		t += s.Micros
	}
	return t
}

// SpendBars lays the 30 days out in a 600×160 chart area.
func (d Dashboard) SpendBars() []views.Bar {
	values, labels := make([]int64, len(d.Spend)), make([]string, len(d.Spend))
	for i, s := range d.Spend {
		values[i], labels[i] = s.Micros, fmt.Sprintf("%s: %s", s.Day.Format("Jan 2"), views.Money(s.Micros))
	}
	return views.BarsOf(values, labels)
}

// SpendMax is the tallest bar's amount, for the axis label.
func (d Dashboard) SpendMax() int64 {
	var most int64
	for _, s := range d.Spend {
		most = max(most, s.Micros)
	}
	return most
}

// KeysPage lists the account's API keys; NewSecret is set only on the answer that created a key.
type KeysPage struct {
	Keys      []models.APIKey
	Name      string
	Error     string
	NewSecret string
	NewPrefix string
	Verified  bool
	// Limits is the create form's spend limit and models, as posted.
	Limits KeyLimitsForm
	// Spent is what each key has been charged and has reserved in its current period.
	Spent *apikeys.Spending
	// Zone is the account's time zone, where the days and months of spend limits are counted.
	Zone string
}

// KeyLimitsForm is a key's spend limit and models as a form shows them.
type KeyLimitsForm struct {
	Spend, Period string
	Models        []string
	Scopes        []string // apikeys.Scopes ticked
	// Choices are the model ids a key may be limited to.
	Choices []string
	Errors  map[string]string
}

// Given reports whether the form holds any limit, or an error about one (the create form then shows
// its limits open).
func (f KeyLimitsForm) Given() bool {
	return f.Spend != "" || len(f.Models) > 0 || len(f.Scopes) > 0 || len(f.Errors) > 0
}

// HasScope reports whether a scope's box is ticked.
func (f KeyLimitsForm) HasScope(scope string) bool { return slices.Contains(f.Scopes, scope) }

// Checked reports whether a model's box is ticked.
func (f KeyLimitsForm) Checked(model string) bool { return slices.Contains(f.Models, model) }

// KeyLimitsPage edits one key's limits.
type KeyLimitsPage struct {
	Key  models.APIKey
	Form KeyLimitsForm
	Zone string
}

// KeySpend says what a key has spent in its current period against its limit: "$1.20 of $5.00 today",
// or, for a key without a limit, "$1.20 this month".
//
// Spent means one thing on every page: what completed videos were charged, as the Usage page counts it.
// What is held for videos still running is said beside it, and a limit counts the two together
// (docs/usage.md, "Spend").
//
// KeySpend is the first line: "$1.20 spent this month" (or "today" for a key limited per day).
func KeySpend(k models.APIKey, s *apikeys.Spending) string {
	when := "this month"
	if k.SpendLimitMicros != nil && k.LimitPeriod == "day" {
		when = "today"
	}
	return views.Money(int64(spentOf(k, s))) + " spent " + when
}

// KeyReserved is what the key's running videos hold, "+ $0.40 reserved for running videos", or "".
func KeyReserved(k models.APIKey, s *apikeys.Spending) string {
	if r := reservedOf(k, s); r > 0 {
		return "+ " + views.Money(int64(r)) + " reserved for running videos"
	}
	return ""
}

// KeyLimitUse is how much of its limit the key has used, "$1.60 of the $5.00 limit", or "" without one.
func KeyLimitUse(k models.APIKey, s *apikeys.Spending) string {
	if k.SpendLimitMicros == nil {
		return ""
	}
	return views.Money(int64(spentOf(k, s)+reservedOf(k, s))) + " of the " + views.Money(*k.SpendLimitMicros) + " limit"
}

func spentOf(k models.APIKey, s *apikeys.Spending) money.Micros {
	if s == nil {
		return 0
	}
	return s.Charged[k.ID]
}

func reservedOf(k models.APIKey, s *apikeys.Spending) money.Micros {
	if s == nil {
		return 0
	}
	return s.Reserved[k.ID]
}

// RevokedBy says who revoked a key, after its time: " by alice@example.com", " by the operator" (the
// command line), or nothing when that was not kept.
func RevokedBy(k models.APIKey) string {
	switch k.RevokedBy {
	case "":
		return ""
	case models.RevokedByCLI:
		return " by the operator"
	}
	return " by " + k.RevokedBy
}

// KeyLimit says a key's spend limit: "limit $5.00 per day", or "no spend limit".
func KeyLimit(k models.APIKey) string {
	if k.SpendLimitMicros == nil {
		return "no spend limit"
	}
	return "limit " + views.Money(*k.SpendLimitMicros) + " per " + k.LimitPeriod
}

// KeyModels says which models a key may use.
func KeyModels(k models.APIKey) string {
	if k.AllowedModels == "" {
		return "every model"
	}
	return strings.ReplaceAll(k.AllowedModels, ",", ", ")
}

// TaskFilter is the tasks page's query.
type TaskFilter struct {
	Status, Model string
}

// TasksPage is one page of the account's tasks.
type TasksPage struct {
	Tasks  []models.Task
	Filter TaskFilter
	Models []string
	Next   string // query string of the next page, "" on the last
	First  string // query string of the first page when not on it
	// SearchedTo is set when the filters matched less than a page among the tasks one page reads
	// (videos.TaskScanWindow): the creation time of the oldest task this page looked at.
	SearchedTo *time.Time
}

// TaskPage is one task with its history.
type TaskPage struct {
	Task    models.Task
	Inputs  models.TaskInputs
	Files   []media.TaskFile // the inputs, labelled, with signed links while stored
	Events  []models.TaskEvent
	Entries []models.LedgerEntry
	Staff   *StaffTask // what only staff see: set on the staff pages
	// CanCancel shows the Cancel button (the customer's own page, while the task can be cancelled).
	CanCancel bool
	// Cancelled says the customer has just cancelled it; CancelProblem why a cancel just asked was not done.
	Cancelled     bool
	CancelProblem string
	// CancelWhile lists the statuses in which the Cancel form stays offered ("queued in_progress"): the
	// live page hides it when the task moves out of them (static/tasks.js).
	CancelWhile string
}

// CallFilter is the call-log page's query, as typed (times are local to the viewer).
type CallFilter struct {
	From, To, Class, Key, Path string
}

// CallsPage is one page of the call log.
type CallsPage struct {
	Rows   []models.CallLog
	Filter CallFilter
	Keys   []models.APIKey
	Next   string
	First  string
	CSV    string // link to the CSV export of the whole filtered range
	Error  string
	// SearchedTo is set when the filter matched less than a page among the calls one page reads
	// (models.CallScanWindow): the time of the oldest call this page looked at; Older goes on from there.
	SearchedTo *time.Time
}

// WalletPage is the balance, the ways to add funds, the balance alerts and the ledger.
type WalletPage struct {
	Available, Reserved int64
	Entries             []models.LedgerEntry
	Next, First         string
	Amount              string // the top-up amount as typed, shown again with Error
	Error               string
	Verified            bool
	Cards               bool // Stripe is configured: the top-up form charges a card
	MinTopup, MaxTopup  int64
	Presets             []int64
	Topups              []models.Topup
	Profile             *models.BillingProfile
	AlertsForm          *AlertsForm
	Billing             *BillingForm // the billing details, as stored or as typed
}

// AlertsForm is the low-balance warning and auto-recharge form, as typed.
type AlertsForm struct {
	LowBalance     string
	RechargeOn     bool
	RechargeBelow  string
	RechargeAmount string
	Errors         map[string]string
}

// TopupPage is one card top-up: where Stripe returns the customer, paid or canceled.
type TopupPage struct {
	Topup         models.Topup
	Available     int64
	Refresh       string // meta refresh while the payment's webhook has not arrived
	GaveUpWaiting bool
	Canceled      bool // the customer came back from Stripe's page without paying
}

// TopupState names a top-up's state for people.
func TopupState(t models.Topup) string {
	switch t.State {
	case models.TopupPending:
		if t.Source == models.TopupAutoRecharge {
			return "Charging your saved card"
		}
		return "Waiting for payment"
	case models.TopupCredited:
		return "Paid and credited"
	case models.TopupFailed:
		return "Payment failed"
	case models.TopupExpired:
		return "Expired: nothing was charged"
	case models.TopupCanceled:
		return "Canceled: nothing was charged"
	}
	return t.State
}

// TopupSource names where a top-up came from.
func TopupSource(t models.Topup) string {
	if t.Source == models.TopupAutoRecharge {
		return "Auto-recharge"
	}
	return "Card"
}

// AccountPage is the signed-in user's settings.
type AccountPage struct {
	Name     string // the account's name in its form (as typed, when refused)
	Errors   map[string]string
	Zones    []string
	TimeZone string
}

// StaffTask is what staff see of a task beyond the customer's page.
type StaffTask struct {
	Summary         string // why the customer was or was not charged, in one sentence
	CredentialID    string
	CredentialLabel string
	Provider        string
	Calls           []models.CallLog // the API calls that name the task
}

func BytesLabel(n *int64) string {
	if n == nil {
		return "size unknown"
	}
	return HumanBytes(*n)
}

// HumanBytes is a size for people: "12.3 MB".
func HumanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// ResetPage is the page a set-password link opens.
type ResetPage struct {
	Token string
	Email string // whose password the link sets
	// First is true when the account has no password yet (made by an operator without one): the page
	// reads "Choose your password".
	First bool
	// SignedInAs is another user signed in in this browser: the page offers to sign them out first.
	SignedInAs string
	Error      string // why the password typed was refused
	BadLink    bool
}

// Title is the page's heading.
func (p ResetPage) Title() string {
	if p.First {
		return "Choose your password"
	}
	return "Choose a new password"
}

// inputCounts says how many images, videos and audio files a task was given, each noun in its number
// ("1 video", "3 images"); kinds it was not given are left out, and a task given none says "none".
func inputCounts(images, videos, audio int) string {
	var parts []string
	for _, k := range []struct {
		n          int
		one, other string
	}{{images, "image", "images"}, {videos, "video", "videos"}, {audio, "audio file", "audio files"}} {
		switch {
		case k.n == 1:
			parts = append(parts, "1 "+k.one)
		case k.n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", k.n, k.other))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// CallPage is one API call with what it did: its key, its task and the money it moved.
type CallPage struct {
	Call    models.CallLog
	KeyName string // the name of the key the call was made with, when it is the account's
	// Moved is the ledger entries this call wrote (a create's reservation, a cancel's release); the
	// task's other entries are in Task.Entries.
	Moved []models.LedgerEntry
	Task  *TaskPage // the task the call concerns, when there is one and it is the account's
}

// keyTitle is a call-log key cell's title: who made the key, when known.
func keyTitle(member string) string {
	if member == "" {
		return ""
	}
	return "made by " + member
}
