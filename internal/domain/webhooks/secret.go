package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// secretPrefix marks a Standard Webhooks signing secret: whsec_ and the standard base64 of the key.
const secretPrefix = "whsec_"

// newSecret returns a signing secret: whsec_ and the standard base64 of 32 random bytes, the form
// openai-go and openai-node accept (they decode what follows whsec_ strictly, and want ≥ 24 bytes).
func newSecret() string {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// hint is what the console shows of a secret after the one time it shows it whole.
func hint(secret string) string { return secretPrefix + "…" + secret[len(secret)-4:] }

// sign returns one Standard Webhooks signature, "v1," and the base64 HMAC-SHA256, under the key in
// secret, of "id.timestamp.body".
func sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil {
		return "", fmt.Errorf("decode signing secret: %w", err)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, timestamp)
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// signature is the webhook-signature header: a signature under each secret still signing (the current
// one first, then the previous during its 24 hours after a rotation), space-separated, so a receiver
// holding either secret verifies.
func signature(secrets []string, id string, timestamp int64, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, sec := range secrets {
		sig, err := sign(sec, id, timestamp, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}
