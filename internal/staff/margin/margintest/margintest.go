// Package margintest seeds the tasks the margin report's tests read, so the package's tests and the
// command's agree on one story: two models over two UTC days, a cheap and a pricey credential, a task
// without a recorded cost, and tasks just outside the range or never charged that must not count.
package margintest

import (
	"fmt"
	"testing"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// The story's models and their prices per second (the second has micro-dollars of its own, so a sum
// that lost any would show).
const (
	HD        = "videogen-2.0-720p"
	HDPrice   = 360_000
	Mini      = "videogen-2.0-mini-480p"
	MiniPrice = 123_457
)

// The credentials, and what a second of video costs at each.
const (
	Cheap      = "ark-cheap"
	CheapCost  = 90_000 // 0.09/s
	Pricey     = "openai-pricey"
	PriceyCost = 180_000 // 0.18/s
)

// noCost marks a task whose upstream cost was never recorded.
const noCost = -1

// The two UTC days the report covers.
var (
	Day1 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	Day2 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
)

// Seed writes the credentials and tasks into d:
//
//	Day1  HD    8 s  cheap   settled   charged 2.880000, cost 0.720000
//	Day1  HD    4 s  pricey  settled   charged 1.440000, cost 0.720000  (a microsecond before midnight)
//	Day1  Mini  1 s  pricey  settled   charged 0.123457, cost 0.180000  (a loss)
//	Day2  Mini  5 s  cheap   settled   charged 0.617285, cost 0.450000  (at midnight)
//	Day2  Mini  5 s  cheap   settled   charged 0.617285, no cost recorded (written in New York time)
//	Day2  HD    4 s  pricey  settled   charged 1.440000, cost 0.720000
//
// and, not to be counted: a failed task released on Day2 that cost 0.720000, settled tasks a
// microsecond before Day1 and at midnight after Day2 (one written in Los Angeles time, on Day2 there),
// and a task still running.
func Seed(t testing.TB, d *db.DB) {
	t.Helper()
	acct := testkit.NewAccount(t, d, "0")
	created := Day1.AddDate(0, 0, -1)
	for _, c := range []models.UpstreamCredential{
		{ID: Cheap, Provider: "ark", Label: "cheap", BaseURL: "https://ark.example/api/v3", MaxConcurrency: 4, Enabled: true},
		{ID: Pricey, Provider: "openai", Label: "pricey", BaseURL: "https://api.openai.example/v1", MaxConcurrency: 2, Enabled: true},
	} {
		c.CreatedAt, c.UpdatedAt = created, created
		if err := d.W.Create(&c).Error; err != nil {
			t.Fatalf("seed credential %s: %v", c.ID, err)
		}
	}
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	losAngeles, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	task := func(model string, seconds int, cred string, costPerSecond int64, state string, completed time.Time) {
		t.Helper()
		n++
		price := int64(HDPrice)
		if model == Mini {
			price = MiniPrice
		}
		status := map[string]string{"settled": "completed", "released": "failed", "reserved": "in_progress"}[state]
		task := models.Task{ID: fmt.Sprintf("video_margin%04d", n), AccountID: acct.ID, Model: model, Prompt: "a margin", Seconds: seconds,
			Size: "1280x720", AspectRatio: "16:9", Inputs: "{}", Status: status, PriceMicros: price, AmountMicros: price * int64(seconds),
			BillingState: state, CredentialID: &cred, NextCheckAt: created, QueueDeadline: created, CreatedAt: created, UpdatedAt: created}
		if !completed.IsZero() {
			task.CompletedAt = &completed
		}
		if costPerSecond != noCost {
			cost := costPerSecond * int64(seconds)
			task.UpstreamCostMicros = &cost
		}
		if err := d.W.Create(&task).Error; err != nil {
			t.Fatalf("seed task %s: %v", task.ID, err)
		}
	}
	task(HD, 8, Cheap, CheapCost, "settled", Day1.Add(10*time.Hour))
	task(HD, 4, Pricey, PriceyCost, "settled", Day2.Add(-time.Microsecond))
	task(Mini, 1, Pricey, PriceyCost, "settled", Day1.Add(12*time.Hour))
	task(Mini, 5, Cheap, CheapCost, "settled", Day2)
	task(Mini, 5, Cheap, noCost, "settled", Day2.Add(time.Hour).In(newYork))
	task(HD, 4, Pricey, PriceyCost, "settled", Day2.Add(18*time.Hour))

	task(HD, 4, Pricey, PriceyCost, "released", Day2.Add(19*time.Hour))
	task(HD, 4, Cheap, CheapCost, "settled", Day1.Add(-time.Microsecond))
	task(HD, 4, Cheap, CheapCost, "settled", Day2.AddDate(0, 0, 1))
	task(HD, 4, Cheap, CheapCost, "settled", Day2.AddDate(0, 0, 1).Add(30*time.Minute).In(losAngeles))
	task(Mini, 5, Cheap, CheapCost, "reserved", time.Time{})
}
