// Package seal protects the few secrets the service must keep in its database yet read back or check
// later — an e-mail body carrying a one-time link, a staff member's TOTP secret, the hashes of recovery
// codes — with keys derived from APP_SECRET, so that a copy of the database alone reveals none of them.
//
// Every use has its own Purpose, and each purpose its own key (HKDF-SHA-256 of the secret, with the
// purpose as the info string): a value sealed for one purpose never opens under another, and a key that
// leaks from one use says nothing of the others. APP_SECRET may hold several comma-separated values
// during a rotation: the first seals (and keys new hashes), every value opens (and checks), so what was
// sealed before the rotation still opens after it.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Purpose says what a key is for. It is the HKDF info string, so it must never change once something
// was sealed under it: add a new purpose (a new version) instead.
type Purpose string

// The purposes of the service's keys.
const (
	// MailOutbox seals queued e-mail bodies (internal/infra/mail). The string predates this package: queued
	// mail was sealed under it.
	MailOutbox Purpose = "videogen mail outbox v1"
	// TOTPSecret seals staff members' authenticator secrets (internal/domain/auth).
	TOTPSecret Purpose = "videogen totp secret v1"
	// RecoveryCode keys the hashes of staff members' recovery codes (internal/domain/auth).
	RecoveryCode Purpose = "videogen recovery code v1"
	// DeviceCookie signs the cookie by which a browser that signed in before is known again
	// (internal/domain/auth, trust.go).
	DeviceCookie Purpose = "videogen device cookie v1"
	// WebhookSecret seals customers' webhook signing secrets, which must be read back to sign
	// (internal/domain/webhooks).
	WebhookSecret Purpose = "videogen webhook secret v1"
	// BackupManifest signs a backup's manifest.json (cmd/videogen, docs/backups.md, "The signature"), so
	// that a restore refuses a backup altered after it was made.
	BackupManifest Purpose = "videogen backup manifest v1"
)

// ErrUnsealable says a sealed value opens under none of the configured secrets: it was sealed under a
// secret since removed from APP_SECRET, for another purpose or other additional data, or was altered.
var ErrUnsealable = errors.New("the sealed value opens with none of the APP_SECRET values (was the secret replaced without keeping the old one?)")

// Key derives the 32-byte key of one purpose from one APP_SECRET value.
func Key(secret string, p Purpose) ([]byte, error) {
	if secret == "" {
		return nil, errors.New("derive key: empty APP_SECRET value")
	}
	if p == "" {
		return nil, errors.New("derive key: no purpose")
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, string(p), 32)
	if err != nil {
		return nil, fmt.Errorf("derive key for %q: %w", p, err)
	}
	return key, nil
}

func keys(secrets []string, p Purpose) ([][]byte, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%s: no APP_SECRET to derive a key from", p)
	}
	out := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		k, err := Key(s, p)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// Sealer encrypts with AES-256-GCM under one purpose's keys.
type Sealer struct {
	aeads []cipher.AEAD
}

// New returns the sealer of purpose p; secrets are the APP_SECRET values, the sealing one first.
func New(secrets []string, p Purpose) (*Sealer, error) {
	ks, err := keys(secrets, p)
	if err != nil {
		return nil, err
	}
	s := &Sealer{}
	for _, k := range ks {
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

// Seal returns nonce ‖ ciphertext of plain under the first secret. ad is bound as additional data: pass
// what identifies where the value belongs (its row, its owner), so a sealed value copied elsewhere does
// not open there.
func (s *Sealer) Seal(plain, ad []byte) ([]byte, error) {
	aead := s.aeads[0]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plain, ad), nil
}

// Open returns the plain value of box sealed with ad, trying every secret; ErrUnsealable when none opens it.
func (s *Sealer) Open(box, ad []byte) ([]byte, error) {
	for _, aead := range s.aeads {
		if len(box) < aead.NonceSize()+aead.Overhead() {
			break
		}
		plain, err := aead.Open(nil, box[:aead.NonceSize()], box[aead.NonceSize():], ad)
		if err == nil {
			return plain, nil
		}
	}
	return nil, ErrUnsealable
}

// MAC hashes values that are only ever checked, never read back (recovery codes), with HMAC-SHA-256 under
// one purpose's keys: unlike a plain hash, a short code's MAC cannot be searched for by brute force
// without APP_SECRET.
type MAC struct {
	keys [][]byte
}

// NewMAC returns the MAC of purpose p; secrets are the APP_SECRET values, the one keying new hashes first.
func NewMAC(secrets []string, p Purpose) (*MAC, error) {
	ks, err := keys(secrets, p)
	if err != nil {
		return nil, err
	}
	return &MAC{keys: ks}, nil
}

// Sum is msg's hash (hex) under the first secret: what to store.
func (m *MAC) Sum(msg []byte) string { return sum(m.keys[0], msg) }

// Sums are msg's hashes under every secret, the first one first: what to look a stored hash up by, so
// that a hash stored before a rotation still matches.
func (m *MAC) Sums(msg []byte) []string {
	out := make([]string, len(m.keys))
	for i, k := range m.keys {
		out[i] = sum(k, msg)
	}
	return out
}

// Verify reports whether mac is msg's hash under any of the secrets, comparing in constant time.
func (m *MAC) Verify(msg []byte, mac string) bool {
	ok := false
	for _, want := range m.Sums(msg) {
		if hmac.Equal([]byte(want), []byte(mac)) {
			ok = true
		}
	}
	return ok
}

func sum(key, msg []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return hex.EncodeToString(h.Sum(nil))
}
