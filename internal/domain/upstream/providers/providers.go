// Package providers is the registry of upstream protocols: each kind an operator may name in the
// upstreams file, and how a credential of that kind is built. Adding a provider kind is one package
// implementing upstream.Provider and one line in Kinds (docs/upstreams.md#adding-a-provider-kind).
package providers

import (
	"fmt"
	"sort"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/ark"
	"videogen/internal/domain/upstream/httpapi"
	"videogen/internal/domain/upstream/poolfile"
	"videogen/models"
)

// Kind builds the adapter of one protocol.
type Kind struct {
	New func(baseURL string, timeout time.Duration) upstream.Provider
	// Check, when set, refuses requests the protocol cannot serve, at create time.
	Check func(models.VideoRequest) error
}

// Kinds lists the protocols by the name the upstreams file gives them.
var Kinds = map[string]Kind{
	// The simulator (`videogen upstream-sim`) in its OpenAI-style protocol; refused in production.
	"sim":    {New: func(base string, t time.Duration) upstream.Provider { return httpapi.New("sim", base, t) }},
	"openai": {New: func(base string, t time.Duration) upstream.Provider { return httpapi.New("openai", base, t) }},
	"ark":    {New: func(base string, t time.Duration) upstream.Provider { return ark.New(base, t) }, Check: ark.Check},
}

// Names lists the known kinds, sorted.
func Names() []string {
	out := make([]string, 0, len(Kinds))
	for k := range Kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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
			routes[alias] = upstream.Route{UpstreamModel: m.UpstreamModel, CostPerSecond: m.CostPerSecond, CostPerMillionTokens: m.CostPerMillionTokens}
		}
		out = append(out, upstream.Credential{ID: s.ID, Name: s.Name, Kind: s.Kind, BaseURL: s.BaseURL, Secret: s.Secret,
			MaxConcurrency: s.MaxConcurrency, Models: routes, Draining: s.Draining, Provider: k.New(s.BaseURL, timeout), Check: k.Check})
	}
	return out, nil
}

// Load reads, checks and builds the upstreams file at path.
func Load(path string, production bool, getenv func(string) string, timeout time.Duration) ([]upstream.Credential, error) {
	specs, err := poolfile.Load(path, poolfile.Options{Kinds: Names(), Production: production}, getenv)
	if err != nil {
		return nil, err
	}
	return Build(specs, timeout)
}
