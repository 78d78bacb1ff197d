package videos

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"videogen/models"
)

// PollCache keeps recently read tasks for GET /v1/videos/{id}, the endpoint clients call most. A task is
// served from memory for at most fresh, and the worker of this instance (and a delete on this instance)
// drops a task's entry the moment it changes it (Forget), so only another instance's change can be seen
// up to `fresh` late — less than the shortest poll interval the API advises (openai-poll-after-ms ≥ 1 s).
// Finished tasks are held to fresh too: a customer may delete one (DELETE /v1/videos/{id}), on any
// instance, and it must then stop showing everywhere within that bound, not when the LRU evicts it.
type PollCache struct {
	fresh time.Duration
	lru   *expirable.LRU[pollKey, cachedTask]
}

// pollKey is a task as one account asks for it.
type pollKey struct {
	account int64
	id      string
}

type cachedTask struct {
	task    models.Task
	fetched time.Time
}

// NewPollCache returns a cache of up to 20,000 tasks; fresh bounds how late a poll may see another
// instance's change of an unfinished task (POLL_CACHE_TTL). fresh <= 0 means no cache: nil.
func NewPollCache(fresh time.Duration) *PollCache {
	if fresh <= 0 {
		return nil
	}
	const size = 20_000
	return &PollCache{fresh: fresh, lru: expirable.NewLRU[pollKey, cachedTask](size, nil, 10*time.Minute)}
}

func (c *PollCache) get(account int64, id string, now time.Time) (*models.Task, bool) {
	e, ok := c.lru.Get(pollKey{account, id})
	if !ok || now.Sub(e.fetched) >= c.fresh {
		return nil, false
	}
	t := e.task
	return &t, true
}

// maxCachedPrompt keeps the cache's memory bounded (20,000 entries of at most a few KB).
const maxCachedPrompt = 2048

func (c *PollCache) put(t *models.Task, now time.Time) {
	if len(t.Prompt) > maxCachedPrompt {
		return
	}
	c.lru.Add(pollKey{t.AccountID, t.ID}, cachedTask{task: *t, fetched: now})
}

// Forget drops a task; the worker calls it after every change it makes. A nil cache forgets nothing.
func (c *PollCache) Forget(account int64, id string) {
	if c != nil {
		c.lru.Remove(pollKey{account, id})
	}
}
