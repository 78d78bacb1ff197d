package web

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// ParseTrustedProxies reads TRUSTED_PROXIES: comma-separated addresses or CIDR prefixes.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("TRUSTED_PROXIES: %q is neither an address nor a CIDR prefix", part)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// clientIP is the address a request came from. X-Forwarded-For is believed only from TRUSTED_PROXIES,
// and read from the right: each trusted proxy appends the address it saw, so the first address from
// the right that is not a trusted proxy is the client's (the left part is whatever the client sent).
func (h *Base) ClientIP(c *fiber.Ctx) string {
	peer, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return c.Context().RemoteIP().String()
	}
	// A proxy may add its own header line instead of extending the first one: read them all, in order.
	var lines []string
	for _, v := range c.Request().Header.PeekAll(fiber.HeaderXForwardedFor) {
		lines = append(lines, string(v))
	}
	return clientAddr(peer.Unmap(), strings.Join(lines, ","), h.TrustedProxies).String()
}

func clientAddr(peer netip.Addr, forwarded string, trusted []netip.Prefix) netip.Addr {
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	if !isTrusted(peer) || strings.TrimSpace(forwarded) == "" {
		return peer
	}
	hops := strings.Split(forwarded, ",")
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return client // a malformed hop: trust nothing further left
		}
		client = a.Unmap()
		if !isTrusted(client) {
			return client
		}
	}
	return client
}
