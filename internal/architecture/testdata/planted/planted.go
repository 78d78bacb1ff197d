// Package planted writes, once each, every kind of row another package owns, each on a line marked
// `// want`: TestOwnershipCatchesPlantedWrites requires the ownership check to flag exactly those lines.
// It is never built into anything.
package planted

import (
	"gorm.io/gorm"

	"videogen/models"
)

func writes(db *gorm.DB) {
	db.Exec("UPDATE tasks SET status = 'failed' WHERE id = ?", "video_x")                         // want
	db.Exec("DELETE FROM task_events WHERE task_id = ?", "video_x")                               // want
	db.Create(&models.Task{ID: "video_x"})                                                        // want
	db.Model(&models.TaskEvent{}).Where("id = ?", 1).Update("detail", "x")                        // want
	db.Exec("UPDATE accounts SET waiting_tasks = waiting_tasks + 1 WHERE id = ?", 1)              // want
	db.Table("tasks").Where("id = ?", "video_x").Delete(nil)                                      // want
	db.Exec("INSERT INTO topups (id) VALUES (?)", "topup_x")                                      // want
	db.Delete(&models.BillingProfile{}, 1)                                                        // want
	db.Model(&models.Topup{}).Where("id = ?", "topup_x").Updates(map[string]any{"state": "x"})    // want
	db.Exec("UPDATE accounts SET available_micros = available_micros + 5 WHERE id = ?", 1)        // want
	db.Model(&models.Account{}).Where("id = ?", 1).Update("reserved_micros", 0)                   // want
	db.Model(&models.Account{}).Where("id = ?", 1).Updates(map[string]any{"available_micros": 5}) // want
	_ = models.Account{AvailableMicros: 5}                                                        // want
	db.Save(&models.Account{ID: 1})                                                               // want
	db.Exec("INSERT INTO ledger_entries (account_id) VALUES (?)", 1)                              // want
	db.Create(&models.LedgerEntry{AccountID: 1})                                                  // want
	db.Exec("INSERT INTO audit_log (actor) VALUES ('x')")                                         // want
	db.Create(&models.AuditEntry{Actor: "x"})                                                     // want

	// Reads and writes of what nobody owns are not flagged.
	db.Exec("SELECT available_micros FROM accounts WHERE available_micros = 0")
	db.Model(&models.Account{}).Where("id = ?", 1).Update("disabled_reason", "x")
	db.Exec("UPDATE sessions SET revoked_at = NULL")
}

func moreWrites(db *gorm.DB, acct *models.Account) {
	acct.AvailableMicros = 5                                                                           // want
	acct.ReservedMicros += 1                                                                           // want
	db.Exec(`UPDATE "topups" SET state = 'credited'`)                                                  // want
	db.Exec("UPDATE public.tasks SET status = 'failed'")                                               // want
	db.Exec("UPDATE accounts AS a SET a.available_micros = 0 WHERE a.id = ?", 1)                       // want
	db.Exec("INSERT INTO accounts (id, available_micros) VALUES (?, ?)", 1, 5)                         // want
	db.Exec("INSERT INTO accounts (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET reserved_micros = 0") // want
	db.Exec("DELETE FROM " + "audit_log" + " WHERE id = 1")                                            // want
	acct.DisabledReason = "reads and other columns are not flagged"
}
