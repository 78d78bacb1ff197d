package models

import "time"

// Media states: a file is pending while its request is still storing files, ready once it succeeded.
const (
	MediaPending = "pending"
	MediaReady   = "ready"
)

// Media is a file a customer uploaded or imported, kept privately and handed out as signed URLs.
type Media struct {
	ID          string `gorm:"primaryKey"`
	AccountID   int64
	State       string
	Source      string // "upload" or "import"
	Part        string // the multipart part or import field it came in
	Kind        string // "image", "video" or "audio"
	ContentType string // decided from the file's bytes
	Bytes       int64
	SHA256      string `gorm:"column:sha256"`
	StorageKey  string
	Origin      string // for imports: the fetched URL without query or user-info
	CreatedAt   time.Time
	ExpiresAt   time.Time  // when the janitor deletes it
	DeletedAt   *time.Time // deletion started; the file is gone for every reader
	// What probing the file found as it was stored (docs/api.md#media-probing): an image's or video's
	// pixel size, a video's duration. Zero where the format does not say or could not be read.
	Width      int
	Height     int
	DurationMs int64
}

// TableName is fixed: "media" is already plural.
func (Media) TableName() string { return "media" }

// TaskMedia is one media input of a task, in the create request's order.
type TaskMedia struct {
	TaskID   string `gorm:"primaryKey"`
	Field    string `gorm:"primaryKey"`
	Position int    `gorm:"primaryKey"`
	MediaID  string
}

// TableName is fixed, as for Media.
func (TaskMedia) TableName() string { return "task_media" }
