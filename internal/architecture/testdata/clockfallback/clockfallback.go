// Package clockfallback plants the fallbacks TestClockGiven exists to stop, each marked `// want`: a part
// that reads the wall clock when its caller gave none.
package clockfallback

import "time"

type Config struct{ Now func() time.Time }

func New(cfg Config) Config {
	if cfg.Now == nil {
		cfg.Now = time.Now // want
	}
	return cfg
}

func Default() Config { return Config{Now: time.Now} } // want

func clock(now func() time.Time) func() time.Time {
	if now != nil {
		return now
	}
	return time.Now // want
}

type Service struct{ Now func() time.Time }

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now() // want
	}
	return s.Now()
}

// Elapsed reads the clock to measure, which is no fallback: a call is fine.
func Elapsed(start time.Time) time.Duration { return time.Now().Sub(start) }

var _ = clock
var _ = (*Service).now
