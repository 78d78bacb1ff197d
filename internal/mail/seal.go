package mail

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
)

// sealed is what an outbox row keeps of a message besides its recipient and subject.
type sealed struct {
	Text string            `json:"text"`
	HTML string            `json:"html"`
	Tags map[string]string `json:"tags,omitempty"`
}

// sealer encrypts outbox bodies with AES-256-GCM under keys derived from APP_SECRET: the bodies carry
// one-time links, which must not be readable from the database alone. The first secret seals; every
// configured secret opens, so a rotation does not strand queued mail.
type sealer struct {
	aeads []cipher.AEAD
}

func newSealer(secrets []string) (*sealer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("mail outbox: no APP_SECRET to seal messages with")
	}
	s := &sealer{}
	for _, secret := range secrets {
		key, err := hkdf.Key(sha256.New, []byte(secret), nil, "videogen mail outbox v1", 32)
		if err != nil {
			return nil, fmt.Errorf("mail outbox: derive key: %w", err)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("mail outbox: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("mail outbox: %w", err)
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

// seal returns nonce ‖ ciphertext of b's JSON. ad (the message's idempotency key and recipient) is bound
// as additional data, so a sealed body copied onto another row, or readdressed, does not open.
func (s *sealer) seal(b sealed, ad []byte) ([]byte, error) {
	plain, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encode mail body: %w", err)
	}
	aead := s.aeads[0]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("mail nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plain, ad), nil
}

var errUnsealable = errors.New("the sealed body opens with none of the APP_SECRET values (was the secret replaced without keeping the old one?)")

func (s *sealer) open(box, ad []byte) (sealed, error) {
	var b sealed
	for _, aead := range s.aeads {
		if len(box) < aead.NonceSize() {
			break
		}
		plain, err := aead.Open(nil, box[:aead.NonceSize()], box[aead.NonceSize():], ad)
		if err != nil {
			continue
		}
		if err := json.Unmarshal(plain, &b); err != nil {
			return b, fmt.Errorf("decode mail body: %w", err)
		}
		return b, nil
	}
	return b, errUnsealable
}
