//go:build !race

package ids

import "testing"

// The race detector's instrumentation makes the buffer escape, so an allocation count means something only
// without it: `make test` runs this file once more without -race (see the Makefile).

func TestAppendRequestIDAllocatesNothing(t *testing.T) {
	var b [RequestIDLen]byte
	if n := testing.AllocsPerRun(100, func() { AppendRequestID(b[:0]) }); n != 0 {
		t.Fatalf("AppendRequestID allocates %v times", n)
	}
}
