package tasks_test

import (
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/models"
)

func TestExplain(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	code := "upstream_rejected"
	entry := func(kind string) models.LedgerEntry { return models.LedgerEntry{Kind: kind, CreatedAt: at} }
	cases := []struct {
		name    string
		status  string
		entries []models.LedgerEntry
		want    string
	}{
		{"completed and settled", tasks.Completed, []models.LedgerEntry{entry("reserve"), entry("settle")}, "Charged $1.50: the video completed"},
		{"failed and released", tasks.Failed, []models.LedgerEntry{entry("reserve"), entry("release")}, "Not charged: the task failed (upstream_rejected) and the $1.50 reserved"},
		{"still running", tasks.InProgress, []models.LedgerEntry{entry("reserve")}, "Not charged yet: $1.50 has been reserved since 2026-11-23 11:00:00 CET"},
		{"failed but settled", tasks.Failed, []models.LedgerEntry{entry("reserve"), entry("settle")}, "Charged $1.50 although the task is failed"},
		{"both", tasks.Completed, []models.LedgerEntry{entry("reserve"), entry("settle"), entry("release")}, "Inconsistent"},
		{"ended, still held", tasks.Failed, []models.LedgerEntry{entry("reserve")}, "neither settled nor released"},
		{"no reservation", tasks.Queued, nil, "no reservation was ever made"},
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task := models.Task{Status: c.status, AmountMicros: 1_500_000}
			if c.status == tasks.Failed {
				task.ErrorCode = &code
			}
			got := tasks.Explain(task, c.entries, paris)
			if !strings.Contains(got, c.want) {
				t.Errorf("Explain = %q, want it to say %q", got, c.want)
			}
		})
	}
}
