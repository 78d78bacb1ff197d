package web

import "sync"

// Transfers bounds how many long requests (uploads, imports) run at once on this instance, in all and
// per account, so one customer cannot take every connection, disk write and fetch slot: it counts them.
type Transfers struct {
	perAccount, total int

	mu        sync.Mutex
	running   int
	byAccount map[int64]int
}

// NewTransfers returns a limiter allowing perAccount requests of one account and total in all at once.
func NewTransfers(perAccount, total int) *Transfers {
	return &Transfers{perAccount: perAccount, total: total, byAccount: map[int64]int{}}
}

// Acquire takes a slot for the account. ok is false when the account or the instance is at its bound;
// otherwise release must be called once the request ends.
func (l *Transfers) Acquire(account int64) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running >= l.total || l.byAccount[account] >= l.perAccount {
		return nil, false
	}
	l.running++
	l.byAccount[account]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.running--
			if l.byAccount[account]--; l.byAccount[account] == 0 {
				delete(l.byAccount, account)
			}
		})
	}, true
}
