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
// come about one per interval for the two instances, not one per instance.
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

		// River records a job completed just after its work returns (its completer batches them), so the
		// jobs are read until the three sweeps' are.
		var jobs []*rivertype.JobRow
		completed := 0
		testkit.Eventually(t, 10*time.Second, "three sweeps recorded completed", func() bool {
			res, err := a.Queue.Client().JobList(context.Background(),
				river.NewJobListParams().Kinds(calllog.RetentionArgs{}.Kind()).First(10_000))
			if err != nil {
				t.Fatal(err)
			}
			jobs, completed = res.Jobs, 0
			for _, j := range jobs {
				if j.State == rivertype.JobStateCompleted {
					completed++
				}
			}
			return completed >= 3
		}, func() string { return fmt.Sprintf("%d completed", completed) })
		var at []time.Time
		for _, j := range jobs {
			if j.Queue != queue.Chores {
				t.Errorf("job %d in queue %q, want %q", j.ID, j.Queue, queue.Chores)
			}
			switch j.State {
			case rivertype.JobStateCompleted, rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRunning:
			default:
				t.Errorf("job %d %s: %v", j.ID, j.State, j.Errors)
			}
			at = append(at, j.ScheduledAt)
		}
		// One scheduler: about one job per interval over the span of the test, where two instances each
		// scheduling would make twice as many. (A change of leader adds one, at the new leader's start.)
		slices.SortFunc(at, time.Time.Compare)
		span := at[len(at)-1].Sub(at[0])
		if most := int(span/every) + 3; len(at) > most {
			t.Errorf("%d sweeps scheduled in %s, want at most %d: one per %s for the cluster", len(at), span, most, every)
		}
	})
}
