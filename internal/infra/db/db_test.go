package db_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
)

// TestWritersWaitForEachOther: two processes' worth of connections on one database (the CLI beside a
// running server, or two instances): a write transaction started while another holds the write lock
// waits for it instead of failing with SQLITE_BUSY — write transactions take the lock when they begin.
func TestWritersWaitForEachOther(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a, err := db.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if _, err := a.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := db.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		a.W.Exec("INSERT INTO accounts (name, created_at, updated_at) VALUES ('x', ?, ?)", db.Now(), db.Now())

		holding := make(chan struct{})
		release := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = a.Tx(ctx, func(tx *gorm.DB) error {
				// Read first, as the ledger does, then write: the transaction must already own the lock.
				var n int64
				tx.Raw("SELECT count(*) FROM accounts").Scan(&n)
				tx.Exec("UPDATE accounts SET available_micros = available_micros + 1")
				close(holding)
				<-release
				return nil
			})
		}()
		<-holding
		began := time.Now()
		go func() { time.Sleep(300 * time.Millisecond); close(release) }()
		err = b.Tx(ctx, func(tx *gorm.DB) error {
			var n int64
			if err := tx.Raw("SELECT available_micros FROM accounts").Scan(&n).Error; err != nil {
				return err
			}
			return tx.Exec("UPDATE accounts SET available_micros = available_micros + 10").Error
		})
		wg.Wait()
		if err != nil {
			t.Fatalf("second writer failed instead of waiting: %v", err)
		}
		if time.Since(began) < 250*time.Millisecond {
			t.Fatalf("second writer did not wait for the first (%v)", time.Since(began))
		}
		var total int64
		a.R.Raw("SELECT available_micros FROM accounts").Scan(&total)
		if total != 11 {
			t.Fatalf("balance %d, want 11: a write was lost", total)
		}
	})
}
