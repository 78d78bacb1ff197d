package mail

import (
	"encoding/json"
	"fmt"

	"videogen/internal/infra/seal"
)

// sealed is what an outbox row keeps of a message besides its recipient and subject. It is sealed
// (internal/infra/seal, purpose seal.MailOutbox): the bodies carry one-time links, which must not be readable
// from the database alone. The first APP_SECRET seals; every configured one opens, so a rotation does not
// strand queued mail.
type sealed struct {
	Text string            `json:"text"`
	HTML string            `json:"html"`
	Tags map[string]string `json:"tags,omitempty"`
}

func newSealer(secrets []string) (*seal.Sealer, error) {
	s, err := seal.New(secrets, seal.MailOutbox)
	if err != nil {
		return nil, fmt.Errorf("mail outbox: %w", err)
	}
	return s, nil
}

// sealBody returns b's JSON sealed. ad (the message's idempotency key and recipient) is bound as
// additional data, so a sealed body copied onto another row, or readdressed, does not open.
func sealBody(s *seal.Sealer, b sealed, ad []byte) ([]byte, error) {
	plain, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encode mail body: %w", err)
	}
	box, err := s.Seal(plain, ad)
	if err != nil {
		return nil, fmt.Errorf("seal mail body: %w", err)
	}
	return box, nil
}

func openBody(s *seal.Sealer, box, ad []byte) (sealed, error) {
	var b sealed
	plain, err := s.Open(box, ad)
	if err != nil {
		return b, fmt.Errorf("open mail body: %w", err)
	}
	if err := json.Unmarshal(plain, &b); err != nil {
		return b, fmt.Errorf("decode mail body: %w", err)
	}
	return b, nil
}
