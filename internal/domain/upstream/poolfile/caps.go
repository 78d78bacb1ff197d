package poolfile

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"videogen/internal/domain/catalog"
	"videogen/internal/domain/upstream"
)

// routeCaps decides what a route renders (docs/upstreams.md#capabilities). A model its kind's table
// lists renders its row, and the route's declaration may only narrow it: a declaration wider than the
// row is refused with the line and what the row renders. A model the table does not list (a new id, an
// Ark endpoint id) is refused unless the route declares seconds, sizes, inputs and audio in full. A
// kind without a table (sim) renders every value the API sells, narrowed by what is declared.
func (p *parser) routeCaps(n *yaml.Node, e map[string]*yaml.Node, path, kind, alias string, m *Model) {
	table, hasTable := p.opt.Tables[kind]
	if !hasTable {
		m.Caps = declared(upstream.Everything(alias), m)
		return
	}
	row, known := table[m.UpstreamModel]
	if !known {
		var missing []string
		for key, given := range map[string]bool{"seconds": m.Seconds != nil, "sizes": m.Sizes != nil, "inputs": m.Inputs != nil, "audio": m.Audio != nil} {
			if !given {
				missing = append(missing, key)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			p.fail(e["upstream_model"], path+".upstream_model", "%q is not in the %s model table (known: %s); a route to another model must declare what it renders in full — add %s",
				m.UpstreamModel, kind, strings.Join(table.IDs(), ", "), strings.Join(missing, ", "))
			return
		}
		// The provider's own rules hold for its every model (Seedance: frames or references; Veo: a last
		// frame needs a first): the route takes the rules of all the kind's rows, the stricter reading.
		kindRow := upstream.ModelRow{ID: m.UpstreamModel, Seconds: upstream.SecondsFrom(upstream.MinSeconds, upstream.MaxSeconds),
			Sizes: catalogTable(), Inputs: map[string]upstream.InputLimit{}, Audio: upstream.AudioOnRequest}
		for _, in := range upstream.Inputs {
			kindRow.Inputs[in] = upstream.InputLimit{}
		}
		seen := map[string]bool{}
		for _, id := range table.IDs() {
			for _, r := range table[id].Rules {
				if !seen[r.Words] {
					seen[r.Words] = true
					kindRow.Rules = append(kindRow.Rules, r)
				}
			}
		}
		base, _ := upstream.RouteCaps(kindRow, alias)
		c := declared(base, m)
		// What the kind's adapter does whatever the model: Ark sends a seed, Sora and Veo render sound.
		c.Seed = slices.ContainsFunc(table.IDs(), func(id string) bool { return table[id].Seed })
		c.AudioAlways = c.Audio && !slices.ContainsFunc(table.IDs(), func(id string) bool { return table[id].Audio != upstream.AudioAlways })
		m.Caps = c
		return
	}
	c, sells := upstream.RouteCaps(row, alias)
	wider := func(key, format string, args ...any) {
		node := e[key]
		if node == nil {
			node = n
		}
		p.fail(node, path+"."+key, "%s; %s renders %s (docs/upstreams.md#capabilities)", fmt.Sprintf(format, args...), m.UpstreamModel, describeRow(c))
	}
	for _, s := range m.Seconds {
		if !slices.Contains(c.Seconds, s) {
			wider("seconds", "%d seconds is wider than the model's table", s)
		}
	}
	for _, s := range m.Sizes {
		if !slices.Contains(c.Sizes, s) {
			wider("sizes", "%s is wider than the model's table", s)
		}
	}
	for _, in := range m.Inputs {
		if !c.Takes(in) {
			wider("inputs", "%s is wider than the model's table", in)
		}
	}
	if m.Audio != nil && *m.Audio && !c.Audio {
		wider("audio", "the model renders silent video only")
	}
	if m.Audio != nil && !*m.Audio && c.AudioAlways {
		wider("audio", "the model renders sound whatever is asked, so audio: false cannot be kept")
	}
	for from, to := range m.SizeMap {
		if !row.RendersAnySize(to) {
			wider("size_map", "%s → %s: the model does not render %s", from, to, to)
		}
	}
	if !sells && len(m.SizeMap) == 0 {
		p.fail(n, path, "%s renders none of %s's sizes (%s); serve another alias, or sell one of its sizes as a size the model renders with size_map", m.UpstreamModel, alias, strings.Join(catalogSizes(alias), ", "))
		return
	}
	c = declared(c, m)
	if m.Inputs != nil {
		for in := range c.Limits {
			if !c.Takes(in) {
				delete(c.Limits, in)
			}
		}
	}
	m.Caps = c
}

// declared narrows c to what the route declares, key by key.
func declared(c upstream.Capabilities, m *Model) upstream.Capabilities {
	if m.Seconds != nil {
		c.Seconds = m.Seconds
	}
	if m.Sizes != nil {
		c.Sizes = m.Sizes
	}
	if m.Inputs != nil {
		c.Inputs = m.Inputs
	}
	if m.Audio != nil {
		c.Audio = *m.Audio
	}
	if m.SizeMap != nil {
		c.SizeMap = m.SizeMap
	}
	return c
}

// describeRow words what a route on a model renders, for the refusal of a wider declaration.
func describeRow(c upstream.Capabilities) string {
	secs := make([]string, len(c.Seconds))
	for i, s := range c.Seconds {
		secs[i] = strconv.Itoa(s)
	}
	inputs := "no media inputs"
	if len(c.Inputs) > 0 {
		inputs = "inputs " + strings.Join(c.Inputs, ", ")
	}
	sound := "silent"
	switch {
	case c.AudioAlways:
		sound = "always with sound"
	case c.Audio:
		sound = "sound on request"
	}
	return fmt.Sprintf("seconds %s, sizes %s, %s, %s", strings.Join(secs, ", "), strings.Join(c.Sizes, ", "), inputs, sound)
}

func catalogSizes(alias string) []string {
	m, _ := catalog.Lookup(alias)
	return m.SizeList()
}

// catalogTable is every catalog size by resolution and ratio: what a route to a model the table does not
// know may declare among.
func catalogTable() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range catalog.Models {
		out[m.Resolution] = m.Sizes()
	}
	return out
}
