package mediafetch

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// parse checks a customer's URL before anything is resolved or dialed.
func (f *Fetcher) parse(raw string) (*url.URL, *Error) {
	if len(raw) > maxURLLen {
		return nil, refuse(fmt.Sprintf("the URL is longer than %d characters", maxURLLen))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's message quotes the input, user-info included: never pass it on.
		return nil, refuse("the URL is not valid")
	}
	if why := f.check(u); why != "" {
		return nil, refuse(why)
	}
	return u, nil
}

// checkRedirect vets each hop before the client follows it. via holds the requests made so far, so
// len(via) is the number of this redirect.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return refuse(fmt.Sprintf("the link redirected more than %d times", maxRedirects))
	}
	if why := f.check(req.URL); why != "" {
		return refuse(fmt.Sprintf("the link redirected to %s (redirect %d), but %s", redact(req.URL), len(via), why))
	}
	return nil
}

// check returns why u must not be fetched, or "" if it may be. The reason reads on its own and after
// "the link redirected to …, but".
func (f *Fetcher) check(u *url.URL) string {
	if u.Scheme != "https" { // url.Parse lower-cases the scheme
		return "only https:// URLs are fetched"
	}
	if u.User != nil {
		return "URLs with a user name or password are never fetched"
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return "the URL has no host name"
	}
	if why := f.checkPort(u.Port()); why != "" {
		return why
	}
	return f.checkHost(u.Host, u.Hostname())
}

func (f *Fetcher) checkPort(port string) string {
	n := uint64(443)
	if port != "" {
		var err error
		if n, err = strconv.ParseUint(port, 10, 16); err != nil {
			return fmt.Sprintf("port %s is not a valid port", port)
		}
	}
	if !slices.Contains(f.p.Ports, uint16(n)) {
		return fmt.Sprintf("port %d is not allowed, only %s", n, portList(f.p.Ports))
	}
	return ""
}

func portList(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ", ")
}

// checkHost judges the host as written. IP literals are judged here, so the customer learns at once why;
// dialTLS judges them again, and names by what they resolve to.
func (f *Fetcher) checkHost(hostport, host string) string {
	if a, err := netip.ParseAddr(host); err == nil {
		if strings.HasPrefix(hostport, "[") != a.Is6() {
			return fmt.Sprintf("%s is not written as an IP address should be", host)
		}
		return f.checkAddr(a)
	}
	if strings.HasPrefix(hostport, "[") {
		return fmt.Sprintf("%s is not a valid IPv6 address", host)
	}
	// The transport turns internationalised names into their ASCII form before resolving; judge that.
	ascii := host
	if !isASCII(host) {
		var err error
		if ascii, err = idna.Lookup.ToASCII(host); err != nil {
			return fmt.Sprintf("%s is not a valid host name", host)
		}
		if _, err := netip.ParseAddr(ascii); err == nil {
			return fmt.Sprintf("%s is an IP address written with non-ASCII characters", host)
		}
	}
	name := strings.TrimSuffix(strings.ToLower(ascii), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") ||
		name == "localhost.localdomain" || strings.HasSuffix(name, ".localhost.localdomain") {
		return fmt.Sprintf("%s always names the machine itself", host)
	}
	if endsInNumber(name) {
		// Browsers read 2130706433, 0177.0.0.1, 0x7f.0.0.1 and 127.1 as IPv4 addresses (WHATWG URL
		// "ends in a number"); Go's resolver would look them up as names. We accept neither reading.
		return fmt.Sprintf("%s reads as an IP address in a non-standard form; write an address as four decimal numbers, or use a host name", host)
	}
	return ""
}

// checkAddr judges an IP address written in a URL. IPv4-mapped IPv6 literals and zones are refused
// whatever the policy: a customer has no reason to write them, and they are how guards get fooled.
func (f *Fetcher) checkAddr(a netip.Addr) string {
	if a.Zone() != "" {
		return fmt.Sprintf("%s has an IPv6 zone, which is never fetched", a)
	}
	if a.Is4In6() {
		v4 := a.Unmap()
		if f.guard.SafeAddr(v4) != nil {
			return fmt.Sprintf("%s is an IPv4-mapped form of %s, %s", a, v4, describe(v4))
		}
		return fmt.Sprintf("%s is an IPv4-mapped IPv6 address; write it as %s", a, v4)
	}
	if f.guard.SafeAddr(a) != nil {
		return fmt.Sprintf("%s is %s", a, describe(a))
	}
	return ""
}

var (
	sharedV4   = netip.MustParsePrefix("100.64.0.0/10")
	metadataV4 = netip.MustParseAddr("169.254.169.254")
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
)

// describe names the kind of address the guard refused, for the customer.
func describe(a netip.Addr) string {
	switch {
	case a.Is4In6():
		return "an IPv4-mapped IPv6 address"
	case a.IsLoopback():
		return "a loopback address"
	case a == metadataV4 || a == metadataV6:
		return "the cloud metadata address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsPrivate():
		return "a private network address"
	case sharedV4.Contains(a):
		return "a shared (carrier-grade NAT) address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsUnspecified():
		return "the unspecified address"
	}
	return "a reserved address"
}

// endsInNumber is the WHATWG URL standard's test for a host a browser parses as IPv4: its last label
// (after one trailing dot) is all digits, or 0x followed by hex digits.
func endsInNumber(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") || strings.HasPrefix(last, "0X") {
		return strings.Trim(last[2:], "0123456789abcdefABCDEF") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// redact prints u without user-info, shortened, for a reason the customer reads.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	s := c.String()
	if len(s) > 200 {
		n := 200
		for !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}
