package ops

import (
	"context"
	"fmt"
	"time"

	"videogen/internal/infra/db"
)

// DailyDays is how many days the overview's charts cover, today included.
const DailyDays = 30

// Day is one UTC day of the platform. Days are UTC days for every viewer, whatever their time zone: two
// staff members comparing the chart, and Prometheus, see the same bars (docs/support.md).
type Day struct {
	Day time.Time // midnight UTC
	// Tasks created that day, and how many of them have since completed or failed.
	Tasks, Completed, Failed int64
	// ChargedMicros is what was charged that day, to the micro-dollar: the settlements (ledger entries of
	// kind settle) made that day, summed exactly as the ledger moved them.
	ChargedMicros int64
}

// Daily returns the n UTC days ending with now's, oldest first, each with its tasks and charges.
func Daily(ctx context.Context, d *db.DB, now time.Time, n int) ([]Day, error) {
	now = now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	first := today.AddDate(0, 0, -(n - 1))
	days := make([]Day, n)
	index := make(map[string]int, n)
	for i := range days {
		days[i].Day = first.AddDate(0, 0, i)
		index[days[i].Day.Format(time.DateOnly)] = i
	}
	r := d.R.WithContext(ctx)
	var created []struct {
		Day                      string
		Tasks, Completed, Failed int64
	}
	if err := r.Raw(`SELECT `+d.UTCDay("created_at")+` AS day, COUNT(*) AS tasks,
			SUM(CASE WHEN status = 'completed' THEN 1 ELSE 0 END) AS completed,
			SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS failed
		FROM tasks WHERE created_at >= ? GROUP BY 1`, first).Scan(&created).Error; err != nil {
		return nil, fmt.Errorf("count tasks per day: %w", err)
	}
	for _, c := range created {
		if i, ok := index[c.Day]; ok {
			days[i].Tasks, days[i].Completed, days[i].Failed = c.Tasks, c.Completed, c.Failed
		}
	}
	// kind = 'settle' literally: the partial index ledger_entries_settled is then usable.
	var charged []struct {
		Day    string
		Micros int64
	}
	if err := r.Raw(`SELECT `+d.UTCDay("created_at")+` AS day, CAST(SUM(-delta_reserved) AS BIGINT) AS micros
		FROM ledger_entries WHERE kind = 'settle' AND created_at >= ? GROUP BY 1`, first).Scan(&charged).Error; err != nil {
		return nil, fmt.Errorf("sum charges per day: %w", err)
	}
	for _, c := range charged {
		if i, ok := index[c.Day]; ok {
			days[i].ChargedMicros = c.Micros
		}
	}
	return days, nil
}
