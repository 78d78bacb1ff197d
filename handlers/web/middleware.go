package web

import (
	"bytes"
	"errors"
	"io"
	"math"
	"mime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/videos"
	"videogen/internal/infra/ids"
	"videogen/internal/infra/lingerclose"
	"videogen/internal/refusal"
	"videogen/models"
)

// arrival is where an API request was going and when its headers arrived, kept until a route runs.
type arrival struct {
	method, path string
	at           time.Time
}

// headerReceived runs when fasthttp has read a request's headers and before it reads the body. For API
// requests with a body it notes the method and path, which lastResortError needs when the body never
// arrives whole. A request without a body (every poll) cannot be cut after its headers: it costs nothing.
func (h *Base) HeaderReceived(header *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if !hasBody(header) {
		return fasthttp.RequestConfig{}
	}
	if path := header.RequestURI(); IsAPIPath(string(path)) {
		u := fasthttp.AcquireURI()
		_ = u.Parse(nil, path)
		h.arriving.Store(header, arrival{method: LogText(string(header.Method()), 16), path: LogText(string(u.Path()), 1024), at: time.Now()})
		fasthttp.ReleaseURI(u)
	} else {
		h.arriving.Delete(header) // nothing stale from an earlier request on this connection's context
	}
	return fasthttp.RequestConfig{}
}

// strictTransport tells browsers, when the site is served over HTTPS (TLS ends at a proxy, so helmet
// cannot tell), to come back only over HTTPS for a year. Not includeSubDomains: the operator's other
// hosts are not ours to commit.
func (h *Base) StrictTransport(c *fiber.Ctx) error {
	h.SetStrictTransport(c)
	return c.Next()
}

func (h *Base) SetStrictTransport(c *fiber.Ctx) {
	if h.SecureCookies {
		c.Set(fiber.HeaderStrictTransportSecurity, "max-age=31536000")
	}
}

// hasBody reports whether a request announces a body: a length, or chunks (-1). 0, or -2 (neither), is
// none.
func hasBody(header *fasthttp.RequestHeader) bool {
	n := header.ContentLength()
	return n > 0 || n == -1
}

// xRequestID is the header's name as the server writes it (canonical case): set as it is, without
// normalizing it on every request.
var xRequestID = []byte("X-Request-Id")

// requestID gives every request a fresh id (never the client's, which could be forged into our logs).
func (h *Base) TagRequest(c *fiber.Ctx) error {
	if hasBody(&c.Request().Header) && IsAPIPath(c.Path()) {
		h.arriving.Delete(&c.Request().Header) // its body arrived: the routes take it from here
	}
	var b [ids.RequestIDLen]byte
	rid := ids.AppendRequestID(b[:0])
	c.Response().Header.SetCanonical(xRequestID, rid)
	c.Locals(LocalRequestID, string(rid))
	return c.Next()
}

// recordCall writes the request's call-log row once the answer is rendered, and returns (lets the answer
// leave) only when the row is committed: a crash loses no answered request's row (calllog.Writer, group
// commit). The row's latency is the handler's time, without this wait; the access log's and
// videogen_http_request_duration_seconds include it. A create that reserved money has written its row in
// its own transaction already (CallRecord).
func (h *Base) RecordCall(c *fiber.Ctx) error {
	at, start := h.Now(), time.Now()
	err := c.Next()
	if c.Locals(LocalCallWritten) != nil {
		return err
	}
	row := callRow(c, at)
	row.Status, row.ErrorCode, row.ErrorMessage = c.Response().StatusCode(), LocalString(c, LocalErrorCode), errorMessage(c)
	row.LatencyMicros = time.Since(start).Microseconds()
	if amt, ok := c.Locals(LocalAmount).(int64); ok {
		row.AmountReservedMicros = amt
	}
	h.CallLog.Record(row)
	return err
}

// CallRecord is the request's call-log row as far as it is known before a create, for the create to write
// in its own transaction; CallWritten then tells RecordCall it is written.
func (h *Base) CallRecord(c *fiber.Ctx) *videos.CallRecord {
	return &videos.CallRecord{Row: callRow(c, h.Now()), Started: time.Now()}
}

// CallWritten marks the request's call-log row as written by its create.
func CallWritten(c *fiber.Ctx) { c.Locals(LocalCallWritten, true) }

// callRow is the request's call-log row without its outcome (status, error code, latency, amount).
func callRow(c *fiber.Ctx, at time.Time) models.CallLog {
	row := models.CallLog{
		// Microseconds, the database's precision, so the call log's page cursors match the stored times.
		At: at.UTC().Truncate(time.Microsecond), RequestID: RequestID(c), Method: LogText(c.Method(), 16), Path: LogText(c.Path(), 1024),
		TaskID: LogText(LocalString(c, LocalTaskID), 80),
		// Never c.Request().Body() here: on the upload route that would read a streamed body whole.
		BytesIn: LocalInt64(c, LocalBytesIn), Files: int(LocalInt64(c, LocalFiles)),
	}
	if p, ok := c.Locals(LocalPrincipal).(apikeys.Principal); ok {
		acct := p.AccountID
		row.AccountID, row.KeyPrefix = &acct, p.KeyPrefix
	}
	return row
}

// renderErrors turns an error returned below it into the API error body, so that recordCall sees the
// final status and code.
func (h *Base) RenderErrors(c *fiber.Ctx) error {
	if err := c.Next(); err != nil {
		return h.APIError(c, err)
	}
	return nil
}

func (h *Base) LogPanic(c *fiber.Ctx, e any) {
	h.Log.Error("panic in handler", "request_id", RequestID(c), "path", c.Path(), "panic", e, "stack", string(debug.Stack()))
}

// authenticate resolves the Bearer key to its account.
func (h *Base) Authenticate(c *fiber.Ctx) error {
	auth := c.Get(fiber.HeaderAuthorization)
	if strings.TrimSpace(auth) == "" {
		return refusal.MissingAPIKey
	}
	scheme, secret, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return refusal.InvalidAPIKey
	}
	p, err := h.Keys.Authenticate(c.UserContext(), strings.TrimSpace(secret))
	if errors.Is(err, apikeys.ErrInvalid) {
		return refusal.InvalidAPIKey
	}
	if errors.Is(err, apikeys.ErrAccountDisabled) {
		c.Locals(LocalPrincipal, p) // the refusal is logged as the account's call: support sees the attempts
		return refusal.AccountDisabled
	}
	if err != nil {
		return err
	}
	c.Locals(LocalPrincipal, p)
	return c.Next()
}

// limitRate applies the per-key token bucket.
func (h *Base) LimitRate(c *fiber.Ctx) error {
	p := Principal(c)
	ok, wait, err := h.Limiter.Allow(c.UserContext(), p.KeyPrefix)
	if err != nil {
		// Only a limiter without a fallback gets here: serve rather than fail every customer.
		h.Log.Warn("rate limiter unavailable", "err", err)
		return c.Next()
	}
	if !ok {
		return refusal.RateLimited(int(math.Ceil(wait.Seconds())))
	}
	return c.Next()
}

// limitTransfers bounds the uploads and imports one account, and this instance, run at once: each holds
// a connection, disk writes or remote fetches for up to half an hour.
func (h *Base) LimitTransfers(c *fiber.Ctx) error {
	if h.Transfers == nil {
		return c.Next()
	}
	release, ok := h.Transfers.Acquire(Principal(c).AccountID)
	if !ok {
		return &refusal.Error{Code: "rate_limited", RetryAfter: 5,
			Message: "Too many uploads and imports are running at once for your account (or on this server). Wait for one to finish, then send this again."}
	}
	defer release()
	return c.Next()
}

func Principal(c *fiber.Ctx) apikeys.Principal {
	p, _ := c.Locals(LocalPrincipal).(apikeys.Principal)
	return p
}

// uploadPath is the one route that reads its own body as it arrives (up to 300 MiB of files).
const uploadPath = "/uploads/v1/files"

// streamsBody reports whether the request's body is read by its handler as it arrives, not before: the
// upload's, and a multipart create's (bounded by its handler to MaxJSONBody, like a JSON body).
func streamsBody(c *fiber.Ctx) bool {
	return c.Method() == fiber.MethodPost && strings.EqualFold(c.Path(), uploadPath) || ReadsCreateForm(c) || ReadsConsoleVideoForm(c)
}

// refuseEncodedBody refuses a compressed request body on every API route: a 1 MiB gzip body can expand
// far past any limit after the limit was checked, and no route takes one.
func (h *Base) RefuseEncodedBody(c *fiber.Ctx) error {
	enc := EncodedBody(c)
	if enc == "" || !hasBody(&c.Request().Header) {
		return c.Next() // nothing encoded
	}
	return refusal.New("unsupported_content_type", "Compressed request bodies (Content-Encoding: %s) are not accepted; send the body uncompressed.", enc)
}

// encodedBody returns the request's content codings other than identity, from every Content-Encoding
// header it has; "" when there are none.
func EncodedBody(c *fiber.Ctx) string {
	var encs []string
	for _, v := range c.Request().Header.PeekAll(fiber.HeaderContentEncoding) {
		for _, e := range strings.Split(string(v), ",") {
			if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "identity") {
				encs = append(encs, e)
			}
		}
	}
	return strings.Join(encs, ", ")
}

// requireJSON refuses a body that is not declared as JSON (the JSON routes' rule).
func (h *Base) RequireJSON(c *fiber.Ctx) error {
	if mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType)); err != nil || mt != fiber.MIMEApplicationJSON {
		return refusal.NotJSON
	}
	return c.Next()
}

// limitBody holds a request body to MaxJSONBody while it is read. The server streams request bodies (so
// uploads never sit whole in memory); without this, c.Body() would read whatever a client sends. The
// upload reads its own, bounded to its own limits.
func (h *Base) LimitBody(c *fiber.Ctx) error {
	if streamsBody(c) {
		return c.Next()
	}
	req := c.Request()
	n := req.Header.ContentLength()
	switch {
	case n > MaxJSONBody:
		c.Locals(LocalBytesIn, int64(n))
		CloseUnread(c)
		return refusal.RequestTooBig
	case !req.IsBodyStream():
		c.Locals(LocalBytesIn, int64(len(req.Body())))
		return c.Next()
	}
	// fasthttp hands a route the body as a stream (only its first 8 KiB are read before), and its own
	// Body() would swallow a read error into the body's text: read it here, held to the limit.
	var buf bytes.Buffer
	buf.Grow(max(n, 0) + bytes.MinRead)
	_, err := buf.ReadFrom(io.LimitReader(req.BodyStream(), MaxJSONBody+1))
	body := buf.Bytes()
	c.Locals(LocalBytesIn, int64(len(body)))
	if err != nil {
		CloseUnread(c)
		if h.Stopping.Err() != nil {
			return refusal.ShuttingDown
		}
		return refusal.New("invalid_request", "The request body could not be read whole; send it again.")
	}
	if len(body) > MaxJSONBody {
		CloseUnread(c)
		return refusal.RequestTooBig
	}
	req.SetBody(body)
	return c.Next()
}

// closeIfBodyUnread finishes reading what is left of a streamed request body after the answer (a
// refusal before or during an upload, or the multipart epilogue), as net/http does: up to drainLimit,
// so the client sees the answer instead of a broken pipe and the connection can serve the next request.
// A longer remainder is not read: the connection is closed, so it is never taken for the next request.
func (h *Base) CloseIfBodyUnread(c *fiber.Ctx) error {
	err := c.Next()
	if rest := c.Context().RequestBodyStream(); rest != nil {
		if h.Stopping.Err() != nil {
			CloseUnread(c) // no time left to read more; the close still lets the answer through
			return err
		}
		if conn := c.Context().Conn(); conn != nil {
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		}
		if n, derr := io.Copy(io.Discard, io.LimitReader(rest, drainLimit+1)); derr != nil || n > drainLimit {
			CloseUnread(c)
		}
	}
	return err
}

// drainLimit is how much of an unread body is read after the answer to keep the connection.
const drainLimit = 256 << 10

// closeUnread ends the connection after this answer, leaving the rest of the request's body unread: it
// must never be taken for the next request. The close is graceful (lingerclose), so the client reads
// the answer instead of a connection reset.
func CloseUnread(c *fiber.Ctx) {
	c.Context().SetConnectionClose()
	lingerclose.Mark(c.Context().Conn())
}

// limitPageBody is limitBody for pages and forms; API routes apply limitBody inside their groups, after
// the call log is set up, so a refused body is logged.
func (h *Base) LimitPageBody(c *fiber.Ctx) error {
	if IsAPIPath(c.Path()) {
		return c.Next()
	}
	// A compressed body is refused before anything reads it, as on the API: fasthttp inflates a
	// compressed multipart form whole, with no limit, the first time a form value is read (the CSRF check
	// reads one on every POST, signed in or not), so a 1 MiB gzip body could take gigabytes. Browsers
	// never compress what they send, nor does Stripe.
	// (Stripe's webhook refuses one itself, in Stripe's JSON.)
	if enc := EncodedBody(c); enc != "" && hasBody(&c.Request().Header) && c.Path() != StripeWebhookPath {
		CloseUnread(c)
		return refusal.New("unsupported_content_type", "Compressed request bodies (Content-Encoding: %s) are not accepted; send the body uncompressed.", enc)
	}
	return h.LimitBody(c)
}

func LocalInt64(c *fiber.Ctx, key string) int64 {
	switch v := c.Locals(key).(type) {
	case int64:
		return v
	case int:
		return int64(v)
	}
	return 0
}

// createFormPath is the route whose multipart body is read here, part by part, instead of whole by
// limitBody: a file part is refused when its headers arrive, before its bytes are read.
const createFormPath = "/v1/videos"

// ConsoleVideoFormPath is the console's new-video form: multipart, with files, read part by part by its
// handler as the API's multipart create is; its CSRF token is its first part (CheckFormCSRF).
const ConsoleVideoFormPath = "/console/videos/new"

// ReadsConsoleVideoForm reports whether the request posts the console's new-video form as multipart.
func ReadsConsoleVideoForm(c *fiber.Ctx) bool {
	if c.Method() != fiber.MethodPost || !strings.EqualFold(strings.TrimSuffix(c.Path(), "/"), ConsoleVideoFormPath) {
		return false
	}
	mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	return err == nil && mt == fiber.MIMEMultipartForm
}

// ReadsCreateForm reports whether the request is a multipart create, whose body limitBody leaves to
// the create handler.
func ReadsCreateForm(c *fiber.Ctx) bool {
	if c.Method() != fiber.MethodPost || !strings.EqualFold(strings.TrimSuffix(c.Path(), "/"), createFormPath) {
		return false
	}
	mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	return err == nil && mt == fiber.MIMEMultipartForm
}
