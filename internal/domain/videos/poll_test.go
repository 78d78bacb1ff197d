package videos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"videogen/billing"
	"videogen/internal/domain/tasks"
	"videogen/internal/domain/videos"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestPollAnswersTheVideoObject: a poll answers exactly the bytes encoding/json writes for the task's
// video object (ToVideo of the whole row, as GET /v1/videos/{id} always answered), whether it reads the
// few columns the object shows or is answered from the cache — for a task with every optional field of
// the object set, and for one with none, and a prompt that needs escaping.
func TestPollAnswersTheVideoObject(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		ctx := context.Background()
		d := pricedDB(t, url)
		acct := testkit.NewAccount(t, d, "10")
		uncached, cached := serviceOn(d, nil), serviceOn(d, videos.NewPollCache(time.Hour))
		create := func(prompt string) string {
			body, _ := json.Marshal(map[string]string{"model": "videogen-2.0-mini-480p", "prompt": prompt})
			req, aerr := videos.ParseCreate(body, videos.MediaPolicy{})
			if aerr != nil {
				t.Fatal(aerr)
			}
			created, err := uncached.Create(ctx, videos.Caller{AccountID: acct.ID}, req, "")
			if err != nil {
				t.Fatal(err)
			}
			return created.Task.ID
		}
		plain := create("a <b>lighthouse</b> & \"the sea\" — é, 🎉, \u2028")
		full := create("everything set")
		now := time.Now().UTC().Truncate(time.Microsecond)
		if err := d.W.Model(&models.Task{}).Where("id = ?", full).Updates(map[string]any{
			"status": tasks.Failed, "progress": 40, "completed_at": now, "expires_at": now.Add(time.Hour),
			"error_code": "generation_failed", "error_message": "the <provider> failed", "seed": 42, "rendered_seed": 7,
			"remixed_from_video_id": plain, "billing_state": billing.Released,
		}).Error; err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{plain, full} {
			var row models.Task
			if err := d.R.Take(&row, "id = ?", id).Error; err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(videos.ToVideo(&row))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []struct {
				name string
				svc  *videos.Service
			}{{"read", uncached}, {"first read, then cached", cached}, {"from the cache", cached}} {
				p, err := s.svc.Poll(ctx, acct.ID, id)
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				if string(p.JSON) != string(want) {
					t.Errorf("%s:\n got %s\nwant %s", s.name, p.JSON, want)
				}
				if !p.CreatedAt.Equal(row.CreatedAt) {
					t.Errorf("%s: created %v, want %v", s.name, p.CreatedAt, row.CreatedAt)
				}
			}
		}
		if !strings.Contains(string(mustPoll(t, uncached, acct.ID, full)), `"seed":7`) {
			t.Error("the rendered seed is not the one shown")
		}
	})
}

func mustPoll(t *testing.T, s *videos.Service, account int64, id string) []byte {
	t.Helper()
	p, err := s.Poll(context.Background(), account, id)
	if err != nil {
		t.Fatal(err)
	}
	return p.JSON
}

// TestPollReadsOneRowByPrimaryKey: the statement of a poll the cache cannot answer finds its row through
// the tasks' primary key, on both engines — on PostgreSQL with an account of a few thousand tasks, whose
// other index (account, created_at, id) would have to scan them all.
func TestPollReadsOneRowByPrimaryKey(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		ctx := context.Background()
		d := pricedDB(t, url)
		acct := testkit.NewAccount(t, d, "10")
		svc := serviceOn(d, nil)
		req, aerr := videos.ParseCreate([]byte(`{"model": "videogen-2.0-mini-480p", "prompt": "one of many"}`), videos.MediaPolicy{})
		if aerr != nil {
			t.Fatal(aerr)
		}
		created, err := svc.Create(ctx, videos.Caller{AccountID: acct.ID}, req, "")
		if err != nil {
			t.Fatal(err)
		}
		id := created.Task.ID
		q := "EXPLAIN QUERY PLAN " + videos.PollQuery
		if d.Postgres {
			// Copies of the task under other ids, and the statistics that say so.
			if err := d.W.Exec(`INSERT INTO tasks SELECT (jsonb_populate_record(t, jsonb_build_object('id', t.id || '_' || g))).*
				FROM tasks t, generate_series(1, 3000) g WHERE t.id = ?`, id).Error; err != nil {
				t.Fatal(err)
			}
			if err := d.W.Exec("ANALYZE tasks").Error; err != nil {
				t.Fatal(err)
			}
			q = "EXPLAIN " + db.NumberPlaceholders(videos.PollQuery)
		}
		rows, err := d.R.Raw(q, id, acct.ID).Rows()
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var plan []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, fmt.Sprint(vals[len(vals)-1])) // the plan's text is the last column
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		want := "Index Scan using tasks_pkey on tasks"
		if !d.Postgres {
			want = "SEARCH tasks USING INDEX sqlite_autoindex_tasks_1 (id=?)"
		}
		if !strings.Contains(text, want) {
			t.Fatalf("the poll's plan does not find the row by the primary key (%q):\n%s", want, text)
		}
	})
}
