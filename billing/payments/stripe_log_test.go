package payments_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v76"

	"videogen/billing/payments"
	"videogen/internal/testkit"
)

// TestStripeClientLogsNoSecrets: the Stripe client, built as the server builds it and logging at debug,
// writes none of what Stripe's answers hold. stripe-go v76.25.0 logs, through the LeveledLogger it is
// given:
//   - stripe.go:740  Debugf("Response: %s", resBody) — every answer whole: a PaymentIntent's
//     client_secret, a Customer's e-mail;
//   - stripe.go:832-834  Errorf("Couldn't deserialize JSON (response status: %v, body sample: '%s'): %v")
//     — the first 500 bytes of an answer that is not JSON;
//   - stripe.go:665 and :669  Errorf("Request error from Stripe (status %v): %v") with the error's JSON,
//     and Errorf("Error decoding error from Stripe: %v") with an answer that is not a Stripe error;
//   - stripe.go:682 and :725  Errorf("Request failed with error: %v") — naming the URL, query included.
//
// Only its failures may reach the log, redacted: no bodies, e-mail addresses, client secrets, keys or
// query strings.
func TestStripeClientLogsNoSecrets(t *testing.T) {
	var logs testkit.LockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// Against Stripe's own mock: answers that succeed, carrying a client secret and an e-mail address.
	sc := payments.NewStripeClient(testkit.StripeKey, testkit.StripeMockURL(t), log)
	pi, err := sc.PaymentIntents.New(&stripe.PaymentIntentParams{Amount: stripe.Int64(2500), Currency: stripe.String("usd"),
		ReceiptEmail: stripe.String("jane.doe@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pi.ClientSecret, "_secret_") {
		t.Fatalf("stripe-mock's PaymentIntent has no client secret to leak: %+v", pi)
	}
	if _, err := sc.Customers.New(&stripe.CustomerParams{Email: stripe.String("jane.doe@example.com")}); err != nil {
		t.Fatal(err)
	}

	// Against a Stripe that fails: an error naming the e-mail, a key and a client secret; an answer that
	// is not JSON; one that is JSON but not a Stripe error; and a connection dropped on a query.
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/payment_intents/pi_123":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"resource_missing",
				"message":"No such payment_intent for jane.doe@example.com (pi_123_secret_abc), key sk_test_leaked123",
				"request_log_url":"https://dashboard.stripe.com/test/logs/req_1?t=1&email=jane.doe@example.com",
				"payment_intent":{"id":"pi_123","object":"payment_intent","client_secret":"pi_123_secret_abc","receipt_email":"jane.doe@example.com"}}}`))
		case "/v1/customers/cus_123":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("<html>jane.doe@example.com pi_123_secret_abc whsec_leaked</html>"))
		case "/v1/customers/cus_456":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(`{"note":"jane.doe@example.com pi_123_secret_abc","address":"1 Private Lane"}`))
		default:
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
		}
	}))
	defer failing.Close()
	fc := payments.NewStripeClient(testkit.StripeKey, failing.URL, log)
	if _, err := fc.PaymentIntents.Get("pi_123", nil); err == nil {
		t.Fatal("a 400 answer is no error")
	}
	if _, err := fc.Customers.Get("cus_123", nil); err == nil {
		t.Fatal("a 500 answer is no error")
	}
	if _, err := fc.Customers.Get("cus_456", nil); err == nil {
		t.Fatal("a 502 answer is no error")
	}
	it := fc.Customers.List(&stripe.CustomerListParams{Email: stripe.String("jane.doe@example.com")})
	for it.Next() {
	}
	if it.Err() == nil {
		t.Fatal("a dropped connection is no error")
	}

	out := logs.String()
	for _, leak := range []string{"_secret_", "jane.doe", "example.com", "sk_test", "whsec_", "Response:", "body sample: '",
		"Private Lane", "<html>", "email="} {
		if strings.Contains(out, leak) {
			t.Errorf("the log holds %q:\n%s", leak, out)
		}
	}
	// Its failures are still there, for staff to see that Stripe failed.
	for _, want := range []string{"Request error from Stripe (status 400)", "Couldn't deserialize JSON", "Error decoding error from Stripe",
		"Request failed with error"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if len(line) > 600 {
			t.Errorf("a line of %d bytes: %s", len(line), line)
		}
	}
}
