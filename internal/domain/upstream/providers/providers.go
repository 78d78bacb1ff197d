// Package providers is the registry of upstream protocols: each kind an operator may name in the
// upstreams file, and how a credential of that kind is built. Adding a provider kind is one package
// implementing upstream.Provider and one line in Kinds (docs/upstreams.md#adding-a-provider-kind).
package providers

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/ark"
	"videogen/internal/domain/upstream/gemini"
	"videogen/internal/domain/upstream/httpapi"
	"videogen/internal/domain/upstream/openai"
	"videogen/internal/domain/upstream/poolfile"
)

// Kind builds the adapter of one protocol.
type Kind struct {
	New func(baseURL string, timeout time.Duration) upstream.Provider
	// Table is what each of the provider's model ids renders (the adapter package's own table, cited
	// there); nil for the simulator's own protocol, which renders everything the API sells
	// (docs/upstreams.md#capabilities).
	Table upstream.Table
}

// Kinds lists the protocols by the name the upstreams file gives them.
var Kinds = map[string]Kind{
	// The simulator (`videogen upstream-sim`) in the platform's own protocol (`--protocol videogen`); refused in production.
	"sim":    {New: func(base string, t time.Duration) upstream.Provider { return httpapi.New("sim", base, t) }},
	"openai": {New: func(base string, t time.Duration) upstream.Provider { return openai.New(base, t) }, Table: openai.Models},
	"ark":    {New: func(base string, t time.Duration) upstream.Provider { return ark.New(base, t) }, Table: ark.Models},
	"gemini": {New: func(base string, t time.Duration) upstream.Provider { return gemini.New(base, t) }, Table: gemini.Models},
}

// Everything is what the simulator renders: every duration, size and input the API sells, with sound.
func Everything(alias string) upstream.Capabilities { return upstream.Everything(alias) }

// Options are the checks of the upstreams file for the kinds this build knows.
func Options(production bool) poolfile.Options {
	tables := map[string]upstream.Table{}
	for name, k := range Kinds {
		if k.Table != nil {
			tables[name] = k.Table
		}
	}
	return poolfile.Options{Kinds: Names(), Tables: tables, Production: production}
}

// Names lists the known kinds, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(Kinds))
}

// Build makes the credentials of resolved specs, each with its protocol's adapter.
func Build(specs []poolfile.Spec, timeout time.Duration) ([]upstream.Credential, error) {
	out := make([]upstream.Credential, 0, len(specs))
	for _, s := range specs {
		k, ok := Kinds[s.Kind]
		if !ok {
			return nil, fmt.Errorf("upstream %s: unknown kind %q", s.ID, s.Kind)
		}
		routes := make(map[string]upstream.Route, len(s.Models))
		for alias, m := range s.Models {
			routes[alias] = upstream.Route{UpstreamModel: m.UpstreamModel, CostPerSecond: m.CostPerSecond, CostPerMillionTokens: m.CostPerMillionTokens,
				Caps: m.Caps}
		}
		out = append(out, upstream.Credential{ID: s.ID, Name: s.Name, Kind: s.Kind, BaseURL: s.BaseURL, Secret: s.Secret,
			MaxConcurrency: s.MaxConcurrency, Models: routes, Draining: s.Draining, Provider: k.New(s.BaseURL, timeout)})
	}
	return out, nil
}

// Load reads, checks and builds the upstreams file at path.
func Load(path string, production bool, getenv func(string) string, timeout time.Duration) ([]upstream.Credential, error) {
	specs, err := poolfile.Load(path, Options(production), getenv)
	if err != nil {
		return nil, err
	}
	return Build(specs, timeout)
}
