package views

import (
	"fmt"
	"time"

	"videogen/models"
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
}

// SpendTotal is the sum of the chart.
func (d Dashboard) SpendTotal() int64 {
	var t int64
	for _, s := range d.Spend {
		t += s.Micros
	}
	return t
}

// Bar is one bar of the spend chart, in SVG units.
type Bar struct {
	X, Y, W, H float64
	Label      string
}

// SpendBars lays the 30 days out in a 600×160 chart area.
func (d Dashboard) SpendBars() []Bar {
	var most int64 = 1
	for _, s := range d.Spend {
		most = max(most, s.Micros)
	}
	var out []Bar
	w := 560.0 / float64(max(len(d.Spend), 1))
	for i, s := range d.Spend {
		h := 130 * float64(s.Micros) / float64(most)
		if s.Micros > 0 {
			h = max(h, 2)
		}
		out = append(out, Bar{X: 30 + float64(i)*w + 1, Y: 140 - h, W: w - 2, H: h,
			Label: fmt.Sprintf("%s: %s", s.Day.Format("Jan 2"), Money(s.Micros))})
	}
	return out
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
}

// TaskPage is one task with its history.
type TaskPage struct {
	Task    models.Task
	Inputs  models.TaskInputs
	Events  []models.TaskEvent
	Entries []models.LedgerEntry
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
}

// WalletPage is the balance and the ledger.
type WalletPage struct {
	Available, Reserved int64
	Entries             []models.LedgerEntry
	Next, First         string
	Amount              string
	Error               string
	Verified            bool
}

// AccountPage is the signed-in user's settings.
type AccountPage struct {
	Errors   map[string]string
	Zones    []string
	TimeZone string
}

// StatusClass names an HTTP status' class for the badge colour ("s2", "s4", "s5").
func StatusClass(status int) string { return fmt.Sprintf("s%d", status/100) }

// Latency formats microseconds as milliseconds.
func Latency(micros int64) string { return fmt.Sprintf("%.1f ms", float64(micros)/1000) }
