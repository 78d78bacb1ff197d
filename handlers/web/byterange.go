package web

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
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

// ServeRanges sends body (size bytes) whole, or the one byte range the request asks for when the
// storage can read at an offset, so players can seek.
func ServeRanges(c *fiber.Ctx, body io.ReadCloser, size int64) error {
	if at, seekable := body.(io.ReaderAt); seekable {
		c.Set(fiber.HeaderAcceptRanges, "bytes")
		if first, last, ok, satisfiable := parseByteRange(c.Get(fiber.HeaderRange), size); ok {
			if !satisfiable {
				_ = body.Close()
				c.Set(fiber.HeaderContentRange, fmt.Sprintf("bytes */%d", size))
				return c.SendStatus(fiber.StatusRequestedRangeNotSatisfiable)
			}
			c.Status(fiber.StatusPartialContent)
			c.Set(fiber.HeaderContentRange, fmt.Sprintf("bytes %d-%d/%d", first, last, size))
			c.Response().SetBodyStream(sectionCloser{io.NewSectionReader(at, first, last-first+1), body}, int(last-first+1))
			return nil
		}
	}
	c.Response().SetBodyStream(body, int(size))
	return nil
}

// sectionCloser reads part of a file and closes the file when done.
type sectionCloser struct {
	*io.SectionReader
	io.Closer
}
