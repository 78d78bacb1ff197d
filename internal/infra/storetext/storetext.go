// Package storetext makes text from outside (request paths, headers, provider messages) safe to store:
// PostgreSQL refuses NUL bytes and invalid UTF-8, and one such value would fail its whole statement.
package storetext

import (
	"strings"
	"unicode/utf8"
)

// Clip returns s without NUL bytes, with invalid UTF-8 replaced by U+FFFD, cut to at most n bytes on a
// character boundary, and copied (so it never aliases a reused request buffer). The second result says
// whether anything was cut.
func Clip(s string, n int) (string, bool) {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= n {
		return strings.Clone(s), false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n]), true
}

// likeEscaper escapes LIKE's wildcards for a pattern written with ESCAPE '\'.
var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

// EscapeLike makes s match itself literally in a `LIKE ? ESCAPE '\'` pattern (both databases).
func EscapeLike(s string) string { return likeEscaper.Replace(s) }
