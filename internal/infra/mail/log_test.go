package mail

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestLogPrintsOneRecordWithTheLink(t *testing.T) {
	var buf bytes.Buffer
	s := NewLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	if err := s.Send(context.Background(), verifyMessage); err != nil {
		t.Fatalf("Send: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d log records, want 1:\n%s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("decode record: %v", err)
	}
	want := map[string]string{
		"level":   "INFO",
		"to":      verifyMessage.To,
		"subject": verifyMessage.Subject,
		"text":    verifyMessage.Text,
	}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("record[%q] = %v, want %q", k, rec[k], v)
		}
	}
}
