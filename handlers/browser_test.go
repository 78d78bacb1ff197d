package handlers_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"videogen/internal/infra/mail"
	"videogen/internal/testkit"
)

// browser is a person using the console: a cookie jar, pages read whole, forms posted with the page's
// CSRF token. Redirects are not followed, so tests see them.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	ip   string // sent as X-Forwarded-For when set
}

func newBrowser(t *testing.T, s *testkit.Server) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: s.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	Status int
	Header http.Header
	Body   string
	Posted string // where submit sent the form
}

func (b *browser) do(req *http.Request) *page {
	b.t.Helper()
	if b.ip != "" {
		req.Header.Set("X-Forwarded-For", b.ip)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return &page{Status: resp.StatusCode, Header: resp.Header, Body: string(body)}
}

func (b *browser) get(path string) *page {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.base+path, nil)
	return b.do(req)
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// post sends a form the way the page at from would: with that page's CSRF token.
func (b *browser) post(from, path string, form url.Values) *page {
	b.t.Helper()
	fromPage := b.get(from)
	m := csrfRE.FindStringSubmatch(fromPage.Body)
	if m == nil {
		b.t.Fatalf("no CSRF token on %s (status %d, Location %q):\n%s", from, fromPage.Status, fromPage.location(), trimPage(fromPage.Body))
	}
	form.Set("_csrf", html.UnescapeString(m[1]))
	return b.postRaw(path, form)
}

// submit fills in and sends a form of the page at from, as a person does: the form in <main> that has a
// field named field (the only form in <main> when field is ""), posted to its own action with its hidden
// fields (the CSRF token among them). The answer's Posted says where it went: the address bar's URL.
func (b *browser) submit(from, field string, values url.Values) *page {
	b.t.Helper()
	doc, err := html.Parse(strings.NewReader(b.get(from).Body))
	if err != nil {
		b.t.Fatalf("%s: %v", from, err)
	}
	var forms []*html.Node
	var walk func(n *html.Node, inMain bool)
	walk = func(n *html.Node, inMain bool) {
		if n.Type == html.ElementNode && n.Data == "main" {
			inMain = true
		}
		if inMain && n.Type == html.ElementNode && n.Data == "form" && strings.EqualFold(attrOf(n, "method"), "post") {
			forms = append(forms, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inMain)
		}
	}
	walk(doc, false)
	has := func(form *html.Node, name string) (hidden url.Values, found bool) {
		hidden = url.Values{}
		var walk func(*html.Node)
		walk = func(n *html.Node) {
			if n.Type == html.ElementNode && (n.Data == "input" || n.Data == "select" || n.Data == "textarea") {
				if attrOf(n, "name") == name {
					found = true
				}
				if attrOf(n, "type") == "hidden" {
					hidden.Set(attrOf(n, "name"), attrOf(n, "value"))
				}
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				walk(c)
			}
		}
		walk(form)
		return hidden, found || name == ""
	}
	for _, f := range forms {
		hidden, ok := has(f, field)
		if !ok || (field == "" && len(forms) > 1) {
			continue
		}
		for k, v := range values {
			hidden[k] = v
		}
		action := attrOf(f, "action")
		if action == "" {
			action = from
		}
		p := b.postRaw(action, hidden)
		p.Posted = action
		return p
	}
	b.t.Fatalf("no form with a field %q on %s", field, from)
	return nil
}

func (b *browser) postRaw(path string, form url.Values) *page {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func (p *page) location() string { return p.Header.Get("Location") }

func (p *page) contains(t *testing.T, parts ...string) {
	t.Helper()
	for _, s := range parts {
		if !strings.Contains(p.Body, html.EscapeString(s)) && !strings.Contains(p.Body, s) {
			t.Fatalf("page (status %d) lacks %q:\n%s", p.Status, s, trimPage(p.Body))
		}
	}
}

func (p *page) lacks(t *testing.T, parts ...string) {
	t.Helper()
	for _, s := range parts {
		if strings.Contains(p.Body, s) {
			t.Fatalf("page shows %q but must not:\n%s", s, trimPage(p.Body))
		}
	}
}

func trimPage(s string) string {
	if i := strings.Index(s, `<main`); i >= 0 {
		s = s[i:]
	}
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return s
}

var linkRE = regexp.MustCompile(`(http://[^\s"<>]+/(?:verify|password/reset)\?token=[A-Za-z0-9]+)`)

// mailsTo counts the e-mails sent to an address so far.
func mailsTo(s *testkit.Server, to string) int {
	n := 0
	for _, m := range s.Mails.Messages() {
		if m.To == to {
			n++
		}
	}
	return n
}

// nextMail waits (e-mails go out in the background) until more than `seen` e-mails went to an address,
// and returns the newest. The deadline only guards against a mail that never comes: on a loaded 2-core
// machine running the whole suite, the outbox can take several seconds to send one.
func nextMail(t *testing.T, s *testkit.Server, to string, seen int) mail.Message {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("a new e-mail to %s (after %d)", to, seen), func() bool {
		return mailsTo(s, to) > seen
	})
	m, _ := s.Mails.Last(to)
	return m
}

// mailedLink waits for an e-mail to an address and returns the verification or reset link of the newest.
func mailedLink(t *testing.T, s *testkit.Server, to string) string {
	t.Helper()
	m := nextMail(t, s, to, 0)
	l := linkRE.FindString(m.Text)
	if l == "" {
		t.Fatalf("no link in the e-mail to %s: %q", to, m.Text)
	}
	return strings.TrimPrefix(l, s.URL)
}

// confirmEmail opens a verification link and presses its button, as a person does, and returns the page
// that follows: the dashboard (signed in) when this browser signed up with the address, else the page
// that says the address is confirmed.
func confirmEmail(t *testing.T, b *browser, link string) *page {
	t.Helper()
	b.get(link).contains(t, "Confirm my e-mail address")
	p := b.post(link, "/verify", url.Values{"token": {link[strings.Index(link, "token=")+6:]}})
	if p.Status == 303 {
		if p.location() != "/console?notice=email-confirmed" {
			t.Fatalf("confirming the address sent the browser to %q", p.location())
		}
		p = b.get(p.location())
	}
	p.contains(t, "Your e-mail address is confirmed")
	return p
}

// signUpVerified creates a verified console user through the forms and returns a signed-in browser:
// confirming the address from the browser that signed up signs the person in.
func signUpVerified(t *testing.T, s *testkit.Server, email string) *browser {
	t.Helper()
	b := newBrowser(t, s)
	p := b.post("/signup", "/signup", url.Values{"email": {email}, "password": {"paper-boats-float-42"}, "terms": {"yes"}})
	p.contains(t, "Check your inbox")
	if p := confirmEmail(t, b, mailedLink(t, s, email)); p.Status != 200 || !strings.Contains(p.Body, "Sign out") {
		t.Fatalf("confirming the address from the sign-up's browser did not sign in: %d", p.Status)
	}
	return b
}
