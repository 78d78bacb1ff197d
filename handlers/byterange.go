package handlers

import (
	"strconv"
	"strings"
)

// parseByteRange reads a single-range Range header ("bytes=0-99", "bytes=100-", "bytes=-500") against a
// body of size bytes and returns the first and last byte. ok is false for a header to ignore (several
// ranges, another unit, garbage: the whole body is then sent); satisfiable is false for a range outside
// the body (416).
func parseByteRange(header string, size int64) (first, last int64, ok, satisfiable bool) {
	spec, found := strings.CutPrefix(header, "bytes=")
	if !found || strings.Contains(spec, ",") || size <= 0 {
		return 0, 0, false, false
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false, false
	}
	if a == "" { // the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, false, false
		}
		if n == 0 {
			return 0, 0, true, false
		}
		return max(size-n, 0), size - 1, true, true
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 {
		return 0, 0, false, false
	}
	last = size - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
			return 0, 0, false, false
		}
		last = min(last, size-1)
	}
	if first >= size {
		return 0, 0, true, false
	}
	return first, last, true, true
}
