package views

import "strings"

// ShortID shortens an id for a table cell: its kind ("req_", "video_") and its last six characters,
// "req_…x7Kq9Z" (a request id's first characters are its time, the same for a second's calls; its last
// are random). The full id goes in the cell's title and behind its copy button.
func ShortID(id string) string {
	kind, rest, ok := strings.Cut(id, "_")
	if !ok || len(rest) <= 8 {
		return id
	}
	return kind + "_…" + rest[len(rest)-6:]
}

// ShortPath shortens the ids in a request path ("/v1/videos/video_…qXLA6m/content"), leaving the rest
// ("webhook_endpoints" is a word, not an id: an id's part after its kind is 16 or more letters and digits).
func ShortPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if isID(s) {
			segs[i] = ShortID(s)
		}
	}
	return strings.Join(segs, "/")
}

// isID reports whether a path segment is one of our ids: a kind, "_", and 16 or more letters and digits.
func isID(s string) bool {
	kind, rest, ok := strings.Cut(s, "_")
	if !ok || kind == "" || len(rest) < 16 {
		return false
	}
	for _, r := range rest {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}
