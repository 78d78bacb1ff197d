package videos

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"videogen/internal/infra/lrucache"
)

// PollCache keeps the answers of recently read tasks for GET /v1/videos/{id}, the endpoint clients call
// most: each task's video object already rendered, so a poll answered from memory neither reads nor
// encodes anything. A task is served from memory for at most fresh, and the worker of this instance (and
// a delete on this instance) drops a task's entry the moment it changes it (Forget), so only another
// instance's change can be seen up to `fresh` late — less than the shortest poll interval the API
// advises (openai-poll-after-ms ≥ 1 s). Finished tasks are held to fresh too: a customer may delete one
// (DELETE /v1/videos/{id}), on any instance, and it must then stop showing everywhere within that bound,
// not when the LRU evicts it.
type PollCache struct {
	fresh time.Duration
	lru   *lru.Cache[pollKey, *Polled]
}

// pollKey is a task as one account asks for it.
type pollKey struct {
	account int64
	id      string
}

// NewPollCache returns a cache of up to 20,000 tasks; fresh bounds how late a poll may see another
// instance's change of an unfinished task (POLL_CACHE_TTL). fresh <= 0 means no cache: nil.
func NewPollCache(fresh time.Duration) *PollCache {
	if fresh <= 0 {
		return nil
	}
	const size = 20_000
	// An entry's age is judged when it is read (get); put drops entries too old to be served
	// (lrucache.DropStale), and the size bounds the memory.
	c, _ := lru.New[pollKey, *Polled](size)
	return &PollCache{fresh: fresh, lru: c}
}

// get returns the account's task id as read at most fresh before now. The answer is shared: never
// changed once cached.
func (c *PollCache) get(account int64, id string, now time.Time) (*Polled, bool) {
	p, ok := c.lru.Get(pollKey{account, id})
	if !ok || now.Sub(p.read) >= c.fresh {
		return nil, false
	}
	return p, true
}

// maxCachedJSON keeps the cache's memory bounded (20,000 entries of at most 3 KB): a task with a prompt
// longer than about 2 KB is read every time.
const maxCachedJSON = 3072

func (c *PollCache) put(account int64, id string, p *Polled) {
	if len(p.JSON) > maxCachedJSON {
		return
	}
	c.lru.Add(pollKey{account, id}, p)
	lrucache.DropStale(c.lru, func(old *Polled) bool { return p.read.Sub(old.read) >= c.fresh })
}

// Forget drops a task; the worker calls it after every change it makes. A nil cache forgets nothing.
func (c *PollCache) Forget(account int64, id string) {
	if c != nil {
		c.lru.Remove(pollKey{account, id})
	}
}
