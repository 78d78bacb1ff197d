// Package providers is the registry of upstream protocols: each kind an operator may name in the
// upstreams file, and how a credential of that kind is built. Adding a provider kind is one package
// implementing upstream.Provider and one line in Kinds (docs/upstreams.md#adding-a-provider-kind).
package providers

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"videogen/internal/domain/catalog"
	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/ark"
	"videogen/internal/domain/upstream/gemini"
	"videogen/internal/domain/upstream/httpapi"
	"videogen/internal/domain/upstream/openai"
	"videogen/internal/domain/upstream/poolfile"
	"videogen/models"
)

// Kind builds the adapter of one protocol.
type Kind struct {
	New func(baseURL string, timeout time.Duration) upstream.Provider
	// Check, when set, refuses requests the protocol cannot serve, at create time.
	Check func(models.VideoRequest) error
	// Defaults is what a route of this kind renders when the upstreams file declares nothing for it,
	// from the provider's documentation (docs/upstreams.md#capabilities). alias is the public model
	// the route serves: sizes are the part of the alias's sizes the provider renders.
	Defaults func(alias string) upstream.Capabilities
}

// Kinds lists the protocols by the name the upstreams file gives them.
var Kinds = map[string]Kind{
	// The simulator (`videogen upstream-sim`) in the platform's own protocol (`--protocol videogen`); refused in production.
	"sim":    {New: func(base string, t time.Duration) upstream.Provider { return httpapi.New("sim", base, t) }, Defaults: Everything},
	"openai": {New: func(base string, t time.Duration) upstream.Provider { return openai.New(base, t) }, Defaults: openAIDefaults},
	"ark":    {New: func(base string, t time.Duration) upstream.Provider { return ark.New(base, t) }, Check: ark.Check, Defaults: arkDefaults},
	"gemini": {New: func(base string, t time.Duration) upstream.Provider { return gemini.New(base, t) }, Check: gemini.Check, Defaults: geminiDefaults},
}

// Everything is what the simulator renders: every duration, size and input the API sells, with sound.
func Everything(alias string) upstream.Capabilities {
	return upstream.Capabilities{Seconds: secondsRange(4, 15), Sizes: catalogSizes(alias), Inputs: upstream.Inputs, Audio: true}
}

// openAIDefaults: OpenAI's Videos API (openapi.yaml, CreateVideoJsonBody, read 2026-11-26) renders 4, 8
// or 12 seconds at 720x1280, 1280x720, 1024x1792 or 1792x1024, takes a first frame (input_reference)
// and no other media, and always renders sound.
func openAIDefaults(alias string) upstream.Capabilities {
	return upstream.Capabilities{Seconds: []int{4, 8, 12}, Sizes: []string{"720x1280", "1280x720", "1024x1792", "1792x1024"},
		Inputs: []string{upstream.InputFirstFrame}, Audio: true}
}

// arkDefaults: Seedance 2.0-class models on Ark render 4 to 15 seconds at the catalog's sizes of their
// resolution, take every input role, and render sound on request (docs/upstreams.md#ark).
func arkDefaults(alias string) upstream.Capabilities {
	return upstream.Capabilities{Seconds: secondsRange(4, 15), Sizes: catalogSizes(alias), Inputs: upstream.Inputs, Audio: true}
}

// geminiDefaults: Veo 3.1 on the Gemini API (ai.google.dev/gemini-api/docs/video, "Veo API parameters
// and specifications", read 2026-11-26) renders 16:9 or 9:16 at 720p or 1080p — 1280x720, 720x1280,
// 1920x1080, 1080x1920, of which the alias's catalog sizes are kept — for 4, 6 or 8 seconds, and only 8
// at 1080p; it takes a first frame (image), a last frame (lastFrame) and up to three reference images
// (referenceImages), and always renders sound. A route on Veo 3.0 (no last frame, no references)
// declares its inputs in the upstreams file (docs/upstreams.md#gemini).
func geminiDefaults(alias string) upstream.Capabilities {
	secs := []int{4, 6, 8}
	if m, ok := catalog.Lookup(alias); ok && m.Resolution == "1080p" {
		secs = []int{8}
	}
	var sizes []string
	for _, s := range catalogSizes(alias) {
		if slices.Contains(gemini.Sizes, s) {
			sizes = append(sizes, s)
		}
	}
	return upstream.Capabilities{Seconds: secs, Sizes: sizes,
		Inputs: []string{upstream.InputFirstFrame, upstream.InputLastFrame, upstream.InputReferenceImages}, Audio: true}
}

func secondsRange(lo, hi int) []int {
	out := make([]int, 0, hi-lo+1)
	for s := lo; s <= hi; s++ {
		out = append(out, s)
	}
	return out
}

// catalogSizes lists the alias's sizes, widest ratio first.
func catalogSizes(alias string) []string {
	m, ok := catalog.Lookup(alias)
	if !ok {
		return nil
	}
	return m.SizeList()
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
				Caps: Capabilities(k, alias, m)}
		}
		out = append(out, upstream.Credential{ID: s.ID, Name: s.Name, Kind: s.Kind, BaseURL: s.BaseURL, Secret: s.Secret,
			MaxConcurrency: s.MaxConcurrency, Models: routes, Draining: s.Draining, Provider: k.New(s.BaseURL, timeout), Check: k.Check})
	}
	return out, nil
}

// Capabilities is what a route renders: what the upstreams file declares for it, field by field, and
// the kind's defaults for the rest.
func Capabilities(k Kind, alias string, m poolfile.Model) upstream.Capabilities {
	defaults := Everything
	if k.Defaults != nil {
		defaults = k.Defaults
	}
	c := defaults(alias)
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

// Load reads, checks and builds the upstreams file at path.
func Load(path string, production bool, getenv func(string) string, timeout time.Duration) ([]upstream.Credential, error) {
	specs, err := poolfile.Load(path, poolfile.Options{Kinds: Names(), Production: production}, getenv)
	if err != nil {
		return nil, err
	}
	return Build(specs, timeout)
}
