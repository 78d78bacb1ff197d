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

// ShortPath shortens the ids in a request path ("/v1/videos/video_…qXLA6m/content"), leaving the rest.
func ShortPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if len(s) > 14 && strings.Contains(s, "_") {
			segs[i] = ShortID(s)
		}
	}
	return strings.Join(segs, "/")
}
