package media

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/models"
)

// StaleUpload is how long a file may stay pending before the janitor treats its request as dead (the
// process stopped mid-upload). Uploads are cut off long before: their body read gives up when idle.
const StaleUpload = 2 * time.Hour

// sweepBatch bounds one sweep's work so a backlog never holds a transaction long.
const sweepBatch = 100

// Sweep deletes files past their retention that no unfinished task uses, and files whose upload died.
// now is the janitor's clock (tests move it). It is safe on several instances at once: rows are claimed with FOR UPDATE SKIP LOCKED (PostgreSQL) or
// under SQLite's single writer, marked deleted in the same transaction, and only then their bytes are
// removed; a crash between the two steps leaves marked rows that the next sweep (anywhere) finishes.
func (s *Service) Sweep(ctx context.Context, now time.Time) (int, error) {
	lock := ""
	if s.DB.Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	// Step 1: mark. The NOT EXISTS runs after the rows are locked, so it sees every task committed by a
	// create that held the rows share-locked (media.Attach).
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var ids []string
		// In-use files are skipped here too (else a hundred of them would fill every batch for ever);
		// the UPDATE checks again once the rows are locked.
		err := tx.Raw("SELECT id FROM media WHERE deleted_at IS NULL AND ((state = ? AND expires_at <= ?) OR (state = ? AND created_at <= ?))"+
			" AND NOT EXISTS (SELECT 1 FROM task_media tm JOIN tasks t ON t.id = tm.task_id WHERE tm.media_id = media.id AND t.status IN ('queued', 'in_progress'))"+
			" ORDER BY expires_at LIMIT ?"+lock,
			models.MediaReady, now, models.MediaPending, now.Add(-StaleUpload), sweepBatch).Scan(&ids).Error
		if err != nil || len(ids) == 0 {
			return err
		}
		return tx.Exec("UPDATE media SET deleted_at = ? WHERE id IN ? AND NOT EXISTS (SELECT 1 FROM task_media tm JOIN tasks t ON t.id = tm.task_id"+
			" WHERE tm.media_id = media.id AND t.status IN ('queued', 'in_progress'))", now, ids).Error
	})
	if err != nil {
		return 0, fmt.Errorf("mark expired media: %w", err)
	}
	// Step 2: delete the bytes, then the rows, of everything marked (by this sweep or an earlier one
	// that did not finish). Deleting twice is harmless, so two instances may overlap here.
	var doomed []models.Media
	if err := s.DB.W.WithContext(ctx).Where("deleted_at IS NOT NULL").Order("deleted_at").Limit(sweepBatch).Find(&doomed).Error; err != nil {
		return 0, fmt.Errorf("list deleted media: %w", err)
	}
	n := 0
	for _, m := range doomed {
		if err := s.Store.Delete(ctx, m.StorageKey); err != nil {
			s.Log.Warn("delete media file; retrying next sweep", "media", m.ID, "err", err)
			continue
		}
		gone := false
		err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
			if err := tx.Where("media_id = ?", m.ID).Delete(&models.TaskMedia{}).Error; err != nil {
				return err
			}
			res := tx.Where("id = ?", m.ID).Delete(&models.Media{})
			gone = res.RowsAffected == 1 // another instance may have finished this one first
			return res.Error
		})
		if err != nil {
			return n, fmt.Errorf("delete media row %s: %w", m.ID, err)
		}
		if gone {
			n++
		}
	}
	return n, nil
}
