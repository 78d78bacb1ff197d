// Package tzlist is every IANA time zone a person may choose from: the zones of tzdata's zone.tab, one
// or more per country (Europe/Amsterdam, Asia/Kolkata, America/Argentina/Salta), copied into zones.txt.
// Links and legacy names (US/Eastern, Asia/Calcutta) are left out, as the console never shows them; the
// server loads each with its own embedded tzdata (time/tzdata), so a zone offered here always works.
package tzlist

import (
	_ "embed"
	"strings"
)

//go:embed zones.txt
var zonesTxt string

var all = parse(zonesTxt)

func parse(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// All returns the zones, sorted by name; UTC is not among them (the forms offer it first, on its own).
// The slice is shared: callers must not change it.
func All() []string { return all }
