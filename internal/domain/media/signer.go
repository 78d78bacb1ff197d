package media

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"videogen/internal/infra/ids"
)

// Signer makes and checks the signed URLs media are handed out as:
// {base}/media/{id}?exp={unix seconds}&sig={HMAC-SHA256}. The first secret signs; every secret verifies,
// so APP_SECRET can be rotated without breaking live links.
type Signer struct {
	base string
	keys [][]byte
}

// NewSigner derives the URL-signing keys from the app secrets (so a signature is never also a valid
// cookie or CSRF token) for URLs under base.
func NewSigner(base string, secrets []string) *Signer {
	s := &Signer{base: strings.TrimRight(base, "/")}
	for _, secret := range secrets {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte("videogen media URL signing key v1"))
		s.keys = append(s.keys, m.Sum(nil))
	}
	return s
}

func (s *Signer) mac(key []byte, id string, exp int64) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{0})
	m.Write([]byte(strconv.FormatInt(exp, 10)))
	return m.Sum(nil)
}

// URL returns the signed URL of media id, valid until exp.
func (s *Signer) URL(id string, exp time.Time) string {
	return s.base + s.Path(id, exp)
}

// Path is URL without the base: "/media/{id}?exp=…&sig=…", for pages served from the same origin (the
// console's CSP takes media from 'self' only, and PUBLIC_BASE_URL may name another host than the page's).
func (s *Signer) Path(id string, exp time.Time) string {
	e := exp.Unix()
	sig := base64.RawURLEncoding.EncodeToString(s.mac(s.keys[0], id, e))
	return "/media/" + id + "?exp=" + strconv.FormatInt(e, 10) + "&sig=" + sig
}

// Verify reports whether sig signs id until exp (unix seconds, as sent) and exp has not passed.
func (s *Signer) Verify(id, exp, sig string, now time.Time) bool {
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !ids.IsMediaID(id) || strconv.FormatInt(e, 10) != exp {
		return false
	}
	ok := false
	for _, k := range s.keys {
		// Compare the text, not decoded bytes: a decoder ignores the spare bits of the last character, so
		// several spellings of one signature would otherwise pass. Every key is checked even after a
		// match, so timing says nothing about which key signed.
		if hmac.Equal([]byte(sig), []byte(base64.RawURLEncoding.EncodeToString(s.mac(k, id, e)))) {
			ok = true
		}
	}
	return ok && now.Unix() < e
}

// Errors of Parse, worded for the customer by the caller.
var (
	ErrNotIssued = errors.New("not a media URL issued by this platform")
	ErrExpired   = errors.New("media URL expired")
)

// Ref is a verified media URL.
type Ref struct {
	ID      string
	Expires time.Time
}

// Parse checks that raw is a URL this platform signed and that it has not expired.
func (s *Signer) Parse(raw string, now time.Time) (Ref, error) {
	rest, ok := strings.CutPrefix(raw, s.base+"/media/")
	if !ok {
		return Ref{}, ErrNotIssued
	}
	id, query, ok := strings.Cut(rest, "?")
	if !ok || !ids.IsMediaID(id) {
		return Ref{}, ErrNotIssued
	}
	q, err := url.ParseQuery(query)
	if err != nil || len(q) != 2 || len(q["exp"]) != 1 || len(q["sig"]) != 1 {
		return Ref{}, ErrNotIssued
	}
	exp, sig := q.Get("exp"), q.Get("sig")
	if !s.Verify(id, exp, sig, time.Unix(0, 0)) { // signature first: an expiry is only news if it is ours
		return Ref{}, ErrNotIssued
	}
	e, _ := strconv.ParseInt(exp, 10, 64)
	if now.Unix() >= e {
		return Ref{ID: id, Expires: time.Unix(e, 0)}, ErrExpired
	}
	return Ref{ID: id, Expires: time.Unix(e, 0)}, nil
}
