package ark

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"videogen/internal/domain/upstream"
)

// Cancel stops a task we gave up on. Ark cancels only a queued task (DELETE moves it to cancelled); a
// running one cannot be stopped and is billed when it succeeds (ErrNotCancellable). The task is read
// first, because DELETE of a finished task deletes its record: a succeeded task's record is kept, so
// its usage can still be read for what it cost us; a task that ended unbilled (failed, cancelled,
// expired) needs nothing.
func (c *Client) Cancel(ctx context.Context, cred upstream.Credential, id string) error {
	_, t, err := c.get(ctx, cred, id)
	if err != nil {
		return err
	}
	switch t.Status {
	case statusQueued:
	case statusRunning:
		return fmt.Errorf("ark cancel %s: %w: it is running, and Ark cancels only queued tasks", id, upstream.ErrNotCancellable)
	case statusSucceeded:
		return fmt.Errorf("ark cancel %s: %w: it has already succeeded", id, upstream.ErrNotCancellable)
	case statusFailed, statusCancelled, statusExpired:
		return nil
	default:
		return fmt.Errorf("ark cancel %s: task status %q: %w", id, t.Status, upstream.ErrTransient)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.taskURL(id), nil)
	if err != nil {
		return fmt.Errorf("ark: build cancel: %w", err)
	}
	resp, err := c.call(r, cred)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Most likely it started running between the read and the DELETE.
		return classify(resp, callCancel)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	return nil
}

// CancelsWhile: Ark cancels a task only while it queues there, which our status mirrors (queued until
// Ark reports it running).
func (c *Client) CancelsWhile(status string) bool { return status == "queued" }
