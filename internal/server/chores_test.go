package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"videogen/internal/domain/calllog"
	"videogen/internal/infra/queue"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestChoresOnTheLeader: the periodic chores are River jobs that the elected leader schedules for the
// whole cluster (docs/jobs.md, "Periodic chores"). With two instances on one database sweeping the call
// log every 300 ms, rows past CALL_LOG_RETENTION are deleted again and again — a schedule, not a sweep
// at start — each sweep is a call_log_retention job of the chores queue that completed, and the sweeps
// come one per interval for the two instances, not one per instance.
func TestChoresOnTheLeader(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		const every = 300 * time.Millisecond
		env := map[string]string{"MEDIA_SWEEP_INTERVAL": every.String(), "LEDGER_CHECK_INTERVAL": "0"}
		a := testkit.Start(t, dbURL, env)
		testkit.Start(t, dbURL, env)
		for round := range 3 {
			id := fmt.Sprintf("req_expired%d", round)
			if err := a.DB.W.Create(&models.CallLog{At: time.Now().UTC().Add(-91 * 24 * time.Hour), RequestID: id,
				Method: "GET", Path: "/v1/models", Status: 200}).Error; err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, 20*time.Second, id+", past the retention, is deleted", func() bool {
				var n int64
				if err := a.DB.R.Model(&models.CallLog{}).Where("request_id = ?", id).Count(&n).Error; err != nil {
					t.Fatal(err)
				}
				return n == 0
			})
		}

		res, err := a.Queue.Client().JobList(context.Background(),
			river.NewJobListParams().Kinds(calllog.RetentionArgs{}.Kind()).First(10_000))
		if err != nil {
			t.Fatal(err)
		}
		completed := 0
		var at []time.Time
		for _, j := range res.Jobs {
			if j.Queue != queue.Chores {
				t.Errorf("job %d in queue %q, want %q", j.ID, j.Queue, queue.Chores)
			}
			switch j.State {
			case rivertype.JobStateCompleted:
				completed++
			case rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRunning:
			default:
				t.Errorf("job %d %s: %v", j.ID, j.State, j.Errors)
			}
			at = append(at, j.ScheduledAt)
		}
		if completed < 3 {
			t.Fatalf("%d sweeps completed, want at least 3 (one per deleted row)", completed)
		}
		// One scheduler: the jobs are an interval apart. Two instances each scheduling would interleave
		// theirs.
		slices.SortFunc(at, time.Time.Compare)
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < every/2 {
				t.Errorf("sweeps scheduled %s apart (at %s and %s), want one per %s for the cluster",
					gap, at[i-1].Format(time.RFC3339Nano), at[i].Format(time.RFC3339Nano), every)
			}
		}
	})
}
