package seal_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"testing"

	"videogen/internal/infra/seal"
)

func TestSealOpens(t *testing.T) {
	s, err := seal.New([]string{"new-secret", "old-secret"}, seal.TOTPSecret)
	if err != nil {
		t.Fatal(err)
	}
	plain, ad := []byte("the secret value"), []byte("user 7")
	box, err := s.Seal(plain, ad)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(box, plain) {
		t.Fatal("the sealed value contains the plain one")
	}
	if got, err := s.Open(box, ad); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open: %q %v", got, err)
	}
	again, _ := s.Seal(plain, ad)
	if bytes.Equal(again, box) {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}

	oldOnly, _ := seal.New([]string{"old-secret"}, seal.TOTPSecret)
	oldBox, _ := oldOnly.Seal(plain, ad)
	otherPurpose, _ := seal.New([]string{"new-secret"}, seal.MailOutbox)
	otherSecret, _ := seal.New([]string{"another-secret"}, seal.TOTPSecret)
	tampered := bytes.Clone(box)
	tampered[len(tampered)-1] ^= 1

	for _, tc := range []struct {
		name   string
		opener *seal.Sealer
		box    []byte
		ad     []byte
		opens  bool
	}{
		{"sealed under a rotated-out secret still listed", s, oldBox, ad, true},
		{"other additional data (another user's row)", s, box, []byte("user 8"), false},
		{"another purpose's key", otherPurpose, box, ad, false},
		{"a secret that was replaced without keeping the old one", otherSecret, box, ad, false},
		{"altered", s, tampered, ad, false},
		{"too short", s, box[:10], ad, false},
		{"empty", s, nil, ad, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.opener.Open(tc.box, tc.ad)
			if tc.opens {
				if err != nil || !bytes.Equal(got, plain) {
					t.Fatalf("open: %q %v", got, err)
				}
				return
			}
			if !errors.Is(err, seal.ErrUnsealable) {
				t.Fatalf("opened (%q) or failed otherwise: %v", got, err)
			}
		})
	}
}

// TestMailKeyUnchanged: the mail outbox's key is derived as it was before this package existed, so
// e-mail queued by an older build still opens.
func TestMailKeyUnchanged(t *testing.T) {
	key, _ := hkdf.Key(sha256.New, []byte("s3cret"), nil, "videogen mail outbox v1", 32)
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	nonce := make([]byte, aead.NonceSize())
	box := aead.Seal(bytes.Clone(nonce), nonce, []byte(`{"text":"hi"}`), []byte("ad"))
	s, err := seal.New([]string{"s3cret"}, seal.MailOutbox)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Open(box, []byte("ad")); err != nil || string(got) != `{"text":"hi"}` {
		t.Fatalf("a body sealed by the old code does not open: %q %v", got, err)
	}
}

func TestSealNeedsASecret(t *testing.T) {
	for _, secrets := range [][]string{nil, {""}, {"ok", ""}} {
		if _, err := seal.New(secrets, seal.TOTPSecret); err == nil {
			t.Errorf("New(%q) accepted", secrets)
		}
		if _, err := seal.NewMAC(secrets, seal.RecoveryCode); err == nil {
			t.Errorf("NewMAC(%q) accepted", secrets)
		}
	}
}

func TestMAC(t *testing.T) {
	m, err := seal.NewMAC([]string{"new-secret", "old-secret"}, seal.RecoveryCode)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := seal.NewMAC([]string{"old-secret"}, seal.RecoveryCode)
	other, _ := seal.NewMAC([]string{"new-secret"}, seal.TOTPSecret)
	msg := []byte("k7m2x9qp")
	sums := m.Sums(msg)
	switch {
	case len(sums) != 2 || sums[0] != m.Sum(msg) || sums[1] != old.Sum(msg):
		t.Fatalf("Sums %q: want the first secret's, then the old one's", sums)
	case len(m.Sum(msg)) != 64 || m.Sum(msg) != m.Sum([]byte("k7m2x9qp")):
		t.Fatalf("Sum %q is not a stable hex SHA-256 MAC", m.Sum(msg))
	case m.Sum(msg) == other.Sum(msg):
		t.Fatal("two purposes share a key")
	case m.Sum(msg) == m.Sum([]byte("k7m2x9qq")):
		t.Fatal("two messages share a hash")
	}
	// Verify takes a hash made under any of the secrets, and nothing else.
	switch {
	case !m.Verify(msg, m.Sum(msg)) || !m.Verify(msg, old.Sum(msg)):
		t.Fatal("Verify refused a hash of the current or the old secret")
	case m.Verify(msg, other.Sum(msg)) || m.Verify([]byte("k7m2x9qq"), m.Sum(msg)) || m.Verify(msg, "") || m.Verify(msg, m.Sum(msg)[:63]):
		t.Fatal("Verify took another purpose's hash, another message's, or a cut one")
	}
}
