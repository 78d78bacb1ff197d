package tasks_test

import (
	"testing"
	"time"

	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestOneClock: the clock a server is given stamps everything its parts store — the task and its log,
// the ledger entries of its reservation and charge, the call log — so a test that moves time moves all of
// them (here ten years ahead).
func TestOneClock(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		const ahead = 10 * 365 * 24 * time.Hour
		s := testkit.StartWith(t, dbURL, nil, server.Options{Now: func() time.Time { return time.Now().Add(ahead) }})
		acct := s.NewAccount(t, "10")
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a decade on"})["id"].(string)
		s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed")
		future := func(what string, at time.Time) {
			t.Helper()
			if d := time.Until(at); d < ahead-time.Hour || d > ahead+time.Hour {
				t.Errorf("%s at %v: not by the server's clock", what, at)
			}
		}
		task := testkit.Task(t, s.DB, id)
		future("task created", task.CreatedAt)
		future("task completed", *task.CompletedAt)
		future("output expires", task.ExpiresAt.Add(-s.Cfg.OutputRetention))
		var events []models.TaskEvent
		s.DB.R.Where("task_id = ?", id).Find(&events)
		for _, e := range events {
			future("task log: "+e.Detail, e.At)
		}
		entries := testkit.Entries(t, s.DB, id)
		if len(entries) != 2 {
			t.Fatalf("%d entries", len(entries))
		}
		for _, e := range entries {
			future("ledger "+e.Kind, e.CreatedAt)
		}
		var calls []models.CallLog
		testkit.Eventually(t, 10*time.Second, "the task's call-log rows", func() bool {
			s.DB.R.Where("task_id = ?", id).Find(&calls)
			return len(calls) > 0
		})
		for _, c := range calls {
			future("call log "+c.Method+" "+c.Path, c.At)
		}
	})
}
