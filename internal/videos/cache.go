package videos

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"videogen/models"
)

// pollCache keeps recently read tasks for GET /v1/videos/{id}, the endpoint clients call most. A
// finished task never changes, so it is served from memory until evicted; an unfinished one for at most
// fresh, and the worker of this instance drops a task's entry the moment it changes it (Forget), so only
// another instance's change can be seen up to `fresh` late — less than the shortest poll interval the
// API advises (openai-poll-after-ms ≥ 1 s).
type pollCache struct {
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

func newPollCache(size int, fresh time.Duration) *pollCache {
	return &pollCache{fresh: fresh, lru: expirable.NewLRU[pollKey, cachedTask](size, nil, 10*time.Minute)}
}

func (c *pollCache) get(account int64, id string, now time.Time) (*models.Task, bool) {
	e, ok := c.lru.Get(pollKey{account, id})
	if !ok || (!e.task.Terminal() && now.Sub(e.fetched) >= c.fresh) {
		return nil, false
	}
	t := e.task
	return &t, true
}

// maxCachedPrompt keeps the cache's memory bounded (20,000 entries of at most a few KB).
const maxCachedPrompt = 2048

func (c *pollCache) put(t *models.Task, now time.Time) {
	if len(t.Prompt) > maxCachedPrompt {
		return
	}
	c.lru.Add(pollKey{t.AccountID, t.ID}, cachedTask{task: *t, fetched: now})
}

func (c *pollCache) forget(account int64, id string) { c.lru.Remove(pollKey{account, id}) }
