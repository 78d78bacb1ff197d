// Package apikeys creates, revokes and authenticates API keys. A key's secret is shown once at
// creation; the database keeps its SHA-256 (keys are 238 random bits, so a fast hash is safe) and a short
// display prefix.
package apikeys

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/internal/infra/ids"
	"videogen/internal/infra/lrucache"
	"videogen/models"
)

// prefixLen is how much of a key is kept in clear for people to tell keys apart: "vg_" and 8 characters.
const prefixLen = 11

// ErrInvalid is returned for a key that is unknown or revoked.
var ErrInvalid = errors.New("invalid api key")

// ErrAccountDisabled is returned for a current key of an account that staff disabled.
var ErrAccountDisabled = errors.New("the key's account is disabled")

// ErrNoSuchKey is returned by Revoke for a prefix no key has.
var ErrNoSuchKey = errors.New("no api key with this prefix")

// Hash returns the stored form of a secret.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// The rules a new key must meet, for the console and the CLI alike.
var (
	// ErrUnverified: keys are equivalent to account credentials, and docs/api.md gives them
	// only to registered, e-mail-verified accounts.
	ErrUnverified = errors.New("the e-mail address is not verified yet; keys need a verified account")
	// ErrBadName: a key's name is at most MaxNameLen characters of printable text.
	ErrBadName = fmt.Errorf("a key name has at most %d characters, without control characters", MaxNameLen)
)

// MaxNameLen is the longest key name, in characters.
const MaxNameLen = 60

// CheckName returns the name as stored (trimmed) or ErrBadName.
func CheckName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxNameLen || strings.ContainsFunc(name, unicode.IsControl) {
		return "", ErrBadName
	}
	return name, nil
}

// Issue makes a key for a user's account once the rules allow it (a verified address, a valid name) and
// returns its secret, which is never retrievable again.
func Issue(ctx context.Context, d *db.DB, u *models.User, name string, now time.Time) (string, *models.APIKey, error) {
	return IssueLimited(ctx, d, u, name, Limits{}, now)
}

// IssueLimited is Issue for a key with limits (ParseLimits reads them): the key exists with its limits
// from its first request, never without them.
func IssueLimited(ctx context.Context, d *db.DB, u *models.User, name string, l Limits, now time.Time) (string, *models.APIKey, error) {
	if !u.Verified() {
		return "", nil, ErrUnverified
	}
	name, err := CheckName(name)
	if err != nil {
		return "", nil, err
	}
	return create(ctx, d, u.AccountID, name, &u.ID, l, now)
}

// Create makes a key for an account and returns its secret, which is never retrievable again. It applies
// no rule: Issue is for people; Create is for the test rig and Issue itself.
func Create(ctx context.Context, d *db.DB, accountID int64, name string, createdBy *int64, now time.Time) (string, *models.APIKey, error) {
	return create(ctx, d, accountID, name, createdBy, Limits{}, now)
}

func create(ctx context.Context, d *db.DB, accountID int64, name string, createdBy *int64, l Limits, now time.Time) (string, *models.APIKey, error) {
	secret := ids.NewAPIKey()
	k := &models.APIKey{
		AccountID: accountID, CreatedBy: createdBy, Name: strings.TrimSpace(name),
		Prefix: secret[:prefixLen], SecretHash: Hash(secret), CreatedAt: now.UTC().Truncate(time.Microsecond),
		LimitPeriod: l.Period, AllowedModels: strings.Join(l.Models, ","), Scopes: strings.Join(l.Scopes, " "),
	}
	if l.Spend > 0 {
		v := int64(l.Spend)
		k.SpendLimitMicros = &v
	}
	if err := d.W.WithContext(ctx).Create(k).Error; err != nil {
		return "", nil, fmt.Errorf("create api key: %w", err)
	}
	return secret, k, nil
}

// Principal is who a request is from.
type Principal struct {
	AccountID int64
	KeyID     int64
	KeyPrefix string
	Scopes    string // space-separated (HasScope)
}

// entry is a key's answer as this instance last read it.
type entry struct {
	p        Principal
	valid    bool
	disabled bool // the account is disabled (kept with the key, so a disabled account costs no more lookups)
	// read is when the lookup that gave this answer began: the answer is as old as that, at most.
	read time.Time
	// refreshing is set by the request that started the entry's reread, so one request starts it.
	refreshing atomic.Bool
}

// Authenticator checks Bearer keys. Answers come from memory, each at most ttl old (API_KEY_CACHE_TTL):
// that bounds how late a revocation, or an account disabled, elsewhere is seen. Within that bound the
// database is read off the request path: a request that finds an answer past half its lifetime is
// answered from it and starts its reread in the background, so a key in steady use is never looked up
// on a request (docs/decisions.md, "A cached poll reads nothing and renders nothing"); only a key unused
// for longer than that waits for its lookup, and then one lookup serves every request that waits for it.
// A revocation, or an account disabled or enabled, on this instance drops the answers at once. A ttl of 0
// caches nothing.
type Authenticator struct {
	db  *db.DB
	ttl time.Duration
	// cache is keyed by the secret's SHA-256 (never the secret itself: the process holds no key longer
	// than the request that carries it).
	cache *lru.Cache[[sha256.Size]byte, *entry]
	group singleflight.Group
	// forgets counts what may have made a lookup's answer stale while it ran (ForgetAccount, Revoke): a
	// lookup that was already reading when one happened does not cache what it read.
	forgets atomic.Uint64
	// lastUsed remembers when (real time) each key's last_used_at was last written, to write it once a
	// minute at most.
	lastUsed *lru.Cache[int64, time.Time]
	now      func() time.Time
	// since measures an answer's age; real time, whatever the clock now says (a test holding its clock
	// still must not make an answer last for ever). Tests of the reread move it.
	since func(time.Time) time.Duration
}

// NewAuthenticator returns an authenticator whose answers are at most ttl old; now is the clock that
// stamps keys' last use and revocation.
func NewAuthenticator(d *db.DB, ttl time.Duration, now func() time.Time) *Authenticator {
	// Both caches judge an entry's age when they read it, and drop entries too old to be used as they
	// add (lrucache.DropStale); their sizes bound the memory.
	cache, _ := lru.New[[sha256.Size]byte, *entry](100_000)
	lastUsed, _ := lru.New[int64, time.Time](100_000)
	return &Authenticator{db: d, ttl: ttl, now: now, since: time.Since, cache: cache, lastUsed: lastUsed}
}

// maxSecretLen bounds what is hashed: our keys are 43 characters.
const maxSecretLen = 200

// Authenticate returns the principal of a secret, or ErrInvalid. A current key of a disabled account
// returns ErrAccountDisabled with its principal, so the refused call can still be told apart in the
// account's call log.
func (a *Authenticator) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if !strings.HasPrefix(secret, "vg_") || len(secret) > maxSecretLen {
		return Principal{}, ErrInvalid
	}
	h := sha256.Sum256([]byte(secret))
	e, ok := a.cache.Get(h)
	if ok {
		switch age := a.since(e.read); {
		case age >= a.ttl:
			ok = false // too old to answer: read it now
		case age >= a.ttl/2 && e.refreshing.CompareAndSwap(false, true):
			go a.reread(h, e)
		}
	}
	if !ok {
		v, err, _ := a.group.Do(string(h[:]), func() (any, error) { return a.load(ctx, h) })
		if err != nil {
			return Principal{}, err
		}
		e = v.(*entry)
	}
	switch {
	case !e.valid:
		return Principal{}, ErrInvalid
	case e.disabled:
		return e.p, ErrAccountDisabled
	}
	return e.p, nil
}

// rereadTimeout bounds a background reread; one that fails leaves the answer to expire.
const rereadTimeout = 10 * time.Second

// reread reads a key's answer again before it expires, off the request path. The new answer replaces
// the old; if there is none (the read failed, or a change on this instance made it suspect), the next
// request may start another, and the answer in hand still expires at its age limit.
func (a *Authenticator) reread(h [sha256.Size]byte, e *entry) {
	ctx, cancel := context.WithTimeout(context.Background(), rereadTimeout)
	defer cancel()
	_, _, _ = a.group.Do(string(h[:]), func() (any, error) { return a.load(ctx, h) })
	e.refreshing.Store(false)
}

// keyRow is a key with its account's state, read in one query.
type keyRow struct {
	models.APIKey
	DisabledAt *time.Time
}

func (a *Authenticator) load(ctx context.Context, h [sha256.Size]byte) (*entry, error) {
	forgets := a.forgets.Load()
	read := time.Now()
	var rows []keyRow
	err := a.db.R.WithContext(ctx).Raw(`SELECT k.id, k.account_id, k.prefix, k.scopes, k.revoked_at, a.disabled_at
		FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.secret_hash = ?`, hex.EncodeToString(h[:])).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("look up api key: %w", err)
	}
	e := &entry{read: read}
	if len(rows) > 0 {
		k := rows[0]
		e.p, e.valid, e.disabled = Principal{AccountID: k.AccountID, KeyID: k.ID, KeyPrefix: k.Prefix, Scopes: k.Scopes}, k.RevokedAt == nil, k.DisabledAt != nil
	}
	if a.ttl > 0 && a.forgets.Load() == forgets { // API_KEY_CACHE_TTL=0: every request reads its key
		a.cache.Add(h, e)
		lrucache.DropStale(a.cache, func(old *entry) bool { return a.since(old.read) >= a.ttl })
	}
	if e.valid && !e.disabled {
		a.touch(e.p.KeyID)
	}
	return e, nil
}

// ForgetAccount drops this instance's cached answers for an account's keys, after it was disabled or
// enabled here, so the change holds on this instance at once; other instances see it when their answers
// reach API_KEY_CACHE_TTL, as with a revocation. The cache is scanned rather than the database asked
// for the account's keys, so this cannot fail once the change is committed.
func (a *Authenticator) ForgetAccount(accountID int64) {
	a.forgets.Add(1)
	for _, h := range a.cache.Keys() {
		if e, ok := a.cache.Peek(h); ok && e.p.AccountID == accountID {
			a.cache.Remove(h)
		}
	}
}

// touch records that a key was used, at most once a minute per key, off the request path.
func (a *Authenticator) touch(keyID int64) {
	if at, ok := a.lastUsed.Get(keyID); ok && a.since(at) < time.Minute {
		return
	}
	a.lastUsed.Add(keyID, time.Now())
	lrucache.DropStale(a.lastUsed, func(at time.Time) bool { return a.since(at) >= time.Minute })
	now := a.now().UTC().Truncate(time.Microsecond)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A lost update only makes "last used" a minute older; it never blocks a request.
		_ = a.db.W.WithContext(ctx).Exec("UPDATE api_keys SET last_used_at = ? WHERE id = ?", now, keyID).Error
	}()
}

// Revoke disables the key with this display prefix, recording who did (by: a member's e-mail). The
// cache entry on this instance goes at once.
func (a *Authenticator) Revoke(ctx context.Context, prefix, by string) error {
	k, err := Revoke(ctx, a.db, prefix, by, a.now())
	if err != nil {
		return err
	}
	a.forgets.Add(1) // a lookup begun before the commit must not cache the key as valid again
	var h [sha256.Size]byte
	if _, err := hex.Decode(h[:], []byte(k.SecretHash)); err != nil {
		return fmt.Errorf("revoked key %s has a malformed hash: %w", prefix, err)
	}
	a.cache.Remove(h)
	return nil
}

// Revoke disables the key with this display prefix, recording who did (by), and returns it. Revoking
// twice is not an error, and the first revocation's time and author stay.
func Revoke(ctx context.Context, d *db.DB, prefix, by string, now time.Time) (*models.APIKey, error) {
	var k models.APIKey
	err := d.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Where("prefix = ?", prefix).Take(&k).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return fmt.Errorf("%s: %w", prefix, ErrNoSuchKey)
			}
			return fmt.Errorf("find key %s: %w", prefix, err)
		}
		if k.RevokedAt != nil {
			return nil
		}
		now := now.UTC().Truncate(time.Microsecond)
		k.RevokedAt, k.RevokedBy = &now, by
		return tx.Model(&k).Updates(map[string]any{"revoked_at": now, "revoked_by": by}).Error
	})
	if err != nil {
		return nil, err
	}
	return &k, nil
}
