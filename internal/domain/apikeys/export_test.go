package apikeys

import "time"

// SetAgeClock replaces how an authenticator measures its answers' ages, so a test can age them.
func SetAgeClock(a *Authenticator, since func(time.Time) time.Duration) { a.since = since }
