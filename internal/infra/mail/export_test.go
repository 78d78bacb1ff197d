package mail

// RetryAfter is retryAfter, for the schedule's test.
var RetryAfter = retryAfter

// SealedBody is a body sealed as Enqueue seals it, for tests that write a message of an older schema by
// hand.
func SealedBody(secrets []string, key, to, text string) ([]byte, error) {
	s, err := newSealer(secrets)
	if err != nil {
		return nil, err
	}
	return sealBody(s, sealed{Text: text, HTML: "<p>" + text + "</p>"}, sealedFor(key, to))
}
