package mediafetch

import (
	"context"
	"net/url"
)

// CheckURL runs Open's URL check alone, for the fuzz target.
func CheckURL(f *Fetcher, raw string) (*url.URL, error) {
	u, e := f.parse(raw)
	if e != nil {
		return nil, e
	}
	return u, nil
}

// DialGuarded connects to addr ("ip:port") with the fetcher's dialer alone, skipping the checks made
// before it, to show the connect-time guard holds by itself.
func DialGuarded(ctx context.Context, f *Fetcher, addr string) error {
	c, err := f.dialer.DialContext(ctx, "tcp", addr)
	if err == nil {
		_ = c.Close()
	}
	return err
}
