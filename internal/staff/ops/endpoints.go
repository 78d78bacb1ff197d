package ops

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"videogen/internal/infra/db"
)

// Endpoint is the API calls to one endpoint: a method and a path whose ids read {id}.
type Endpoint struct {
	Method, Path string
	Calls        int64
	ClientErrors int64 // answered 4xx
	ServerErrors int64 // answered 5xx
}

// Errors is the calls answered with an error status.
func (e Endpoint) Errors() int64 { return e.ClientErrors + e.ServerErrors }

// ErrorRate is the share of calls answered with an error status (4xx or 5xx), from 0 to 1.
func (e Endpoint) ErrorRate() float64 {
	if e.Calls == 0 {
		return 0
	}
	return float64(e.Errors()) / float64(e.Calls)
}

// EndpointErrors reads the call log since `since` (by its at index), per endpoint, the endpoints with the
// most server errors first, then the most errors, then the busiest.
func EndpointErrors(ctx context.Context, d *db.DB, since time.Time) ([]Endpoint, error) {
	var rows []Endpoint
	// Grouped by the path as called first: the database does the counting, and the rows that come back
	// are one per distinct path (a few per task polled), which NormalizePath then folds together.
	if err := d.R.WithContext(ctx).Raw(`SELECT method, path, COUNT(*) AS calls,
			SUM(CASE WHEN status >= 400 AND status < 500 THEN 1 ELSE 0 END) AS client_errors,
			SUM(CASE WHEN status >= 500 THEN 1 ELSE 0 END) AS server_errors
		FROM call_logs WHERE at >= ? GROUP BY method, path`, since.UTC()).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("count calls per endpoint: %w", err)
	}
	merged := map[[2]string]*Endpoint{}
	for _, r := range rows {
		key := [2]string{strings.ToUpper(r.Method), NormalizePath(r.Path)}
		e := merged[key]
		if e == nil {
			e = &Endpoint{Method: key[0], Path: key[1]}
			merged[key] = e
		}
		e.Calls += r.Calls
		e.ClientErrors += r.ClientErrors
		e.ServerErrors += r.ServerErrors
	}
	out := make([]Endpoint, 0, len(merged))
	for _, e := range merged {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Endpoint) int {
		return cmp.Or(cmp.Compare(b.ServerErrors, a.ServerErrors), cmp.Compare(b.Errors(), a.Errors()),
			cmp.Compare(b.Calls, a.Calls), strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	return out, nil
}

// idSegment is a path segment that may be an identifier: a prefixed public id (video_…, file_…, req_…,
// topup_…: random letters and digits after the prefix) or a number.
var idSegment = regexp.MustCompile(`^(?:[A-Za-z]+_([0-9A-Za-z]{8,})|[0-9]+)$`)

// isID tells an id from a word with an underscore ("image_variations"): a random id's tail has a digit
// or a capital (all 24 characters lower-case letters: odds of one in a billion).
func isID(seg string) bool {
	m := idSegment.FindStringSubmatch(seg)
	return m != nil && (m[1] == "" || strings.ContainsAny(m[1], "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
}

// NormalizePath turns a called path into its endpoint: ids become {id}, letters lower case and a
// trailing slash goes, as the router reads it ("/v1/Videos/video_abc12/" → "/v1/videos/{id}").
func NormalizePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if isID(s) {
			segs[i] = "{id}"
		} else {
			segs[i] = strings.ToLower(s)
		}
	}
	out := strings.Join(segs, "/")
	if len(out) > 1 {
		out = strings.TrimRight(out, "/")
	}
	if out == "" {
		out = "/"
	}
	return out
}
