// Package poolfile reads the operator's upstreams file (UPSTREAMS_FILE): which upstream credentials the
// platform may use, of which kind, where, with which secret, how many tasks each may run, and which
// public model aliases each serves under which provider model at which cost (docs/upstreams.md).
//
// Parse is pure (text in, specs or errors out) and refuses a file whole: every problem is reported with
// the line and the key, so an operator fixes the file in one go. Resolve then reads each secret from
// where the spec says, without ever putting the secret in an error.
package poolfile

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"videogen/internal/domain/catalog"
	"videogen/internal/domain/upstream"
	"videogen/internal/money"
)

// Spec is one credential as the file describes it.
type Spec struct {
	ID             string
	Name           string
	Kind           string
	BaseURL        string
	SecretEnv      string
	SecretFile     string
	Secret         string // inline; refused in production
	MaxConcurrency int
	Draining       bool
	Models         map[string]Model
	Line           int // where the entry starts, for messages
}

// Model is how one credential serves one public alias.
type Model struct {
	UpstreamModel        string
	CostPerSecond        money.Micros
	CostPerMillionTokens money.Micros
	// What the upstream model renders, where the file declares it; each field left nil takes the kind's
	// default (docs/upstreams.md#capabilities).
	Seconds []int
	Sizes   []string
	Inputs  []string
	Audio   *bool
	SizeMap map[string]string
	// Caps is what the route renders: its model's row in its kind's capability table, narrowed by what
	// the route declares (docs/upstreams.md#capabilities).
	Caps upstream.Capabilities
	Line int // where the alias's entry starts, for messages
}

// Options are what the file is checked against.
type Options struct {
	Kinds []string // the provider kinds this build knows
	// Tables holds the capability table of each kind that has one (openai, ark, gemini); a route of a
	// kind without one (sim) renders what it declares, and everything else.
	Tables     map[string]upstream.Table
	Production bool // APP_ENV=production: no inline secrets, no simulator, https only
}

// MaxConcurrency bounds max_concurrency: a typo of a few zeros should not open thousands of slots.
const MaxConcurrency = 10000

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Parse reads the file's text (name is used in messages). It returns every problem found, joined.
func Parse(name string, text []byte, opt Options) ([]Spec, error) {
	p := &parser{name: name, opt: opt}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: the file is empty; it needs an `upstreams:` list (docs/upstreams.md)", name)
	}
	specs := p.file(doc.Content[0])
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return specs, nil
}

type parser struct {
	name string
	opt  Options
	errs []error
}

func (p *parser) fail(n *yaml.Node, key, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s: %s", p.name, n.Line, key, fmt.Sprintf(format, args...)))
}

// entries returns a mapping's key/value pairs, reporting keys that are not allowed or repeated.
func (p *parser) entries(n *yaml.Node, path string, allowed ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n.Kind != yaml.MappingNode {
		p.fail(n, path, "must be a mapping of keys to values")
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := path + "." + k.Value
		if path == "" {
			key = k.Value
		}
		if allowed != nil && !contains(allowed, k.Value) {
			p.fail(k, key, "unknown key (allowed: %s)", strings.Join(allowed, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.fail(k, key, "given twice")
			continue
		}
		out[k.Value] = v
	}
	return out
}

func (p *parser) file(root *yaml.Node) []Spec {
	top := p.entries(root, "", "upstreams")
	list, ok := top["upstreams"]
	if !ok {
		if root.Kind == yaml.MappingNode {
			p.fail(root, "upstreams", "missing: the file lists its credentials under `upstreams:`")
		}
		return nil
	}
	if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
		p.fail(list, "upstreams", "must be a non-empty list of credentials")
		return nil
	}
	var specs []Spec
	seen := map[string]int{}
	for i, item := range list.Content {
		s := p.spec(item, fmt.Sprintf("upstreams[%d]", i))
		if s.ID != "" {
			if line, dup := seen[s.ID]; dup {
				p.fail(item, fmt.Sprintf("upstreams[%d].id", i), "%q is already the id of the credential on line %d; ids are unique", s.ID, line)
			}
			seen[s.ID] = item.Line
		}
		specs = append(specs, s)
	}
	return specs
}

var specKeys = []string{"id", "name", "kind", "base_url", "secret_env", "secret_file", "secret", "max_concurrency", "models", "draining"}

func (p *parser) spec(n *yaml.Node, path string) Spec {
	s := Spec{Line: n.Line}
	e := p.entries(n, path, specKeys...)
	if n.Kind != yaml.MappingNode {
		return s
	}
	s.ID = p.str(e, n, path, "id", true)
	if s.ID != "" && !idPattern.MatchString(s.ID) {
		p.fail(e["id"], path+".id", "%q must be 1 to 64 of a-z, 0-9, '.', '_' or '-', starting with a letter or digit", s.ID)
	}
	s.Name = p.str(e, n, path, "name", false)
	if s.Name == "" {
		s.Name = s.ID
	}
	s.Kind = p.str(e, n, path, "kind", true)
	if s.Kind != "" && !contains(p.opt.Kinds, s.Kind) {
		p.fail(e["kind"], path+".kind", "%q is not a known kind (known: %s)", s.Kind, strings.Join(p.opt.Kinds, ", "))
	}
	if s.Kind == "sim" && p.opt.Production {
		p.fail(e["kind"], path+".kind", "the simulator is not a provider: it is refused in production")
	}
	s.BaseURL = strings.TrimRight(p.str(e, n, path, "base_url", true), "/")
	if s.BaseURL != "" {
		p.baseURL(e["base_url"], path+".base_url", s.BaseURL)
	}
	s.SecretEnv = p.str(e, n, path, "secret_env", false)
	s.SecretFile = p.str(e, n, path, "secret_file", false)
	s.Secret = p.str(e, n, path, "secret", false)
	given := 0
	for _, v := range []string{s.SecretEnv, s.SecretFile, s.Secret} {
		if v != "" {
			given++
		}
	}
	switch {
	case given == 0:
		p.fail(n, path, "needs one of secret_env, secret_file or secret")
	case given > 1:
		p.fail(n, path, "give exactly one of secret_env, secret_file or secret")
	case s.Secret != "" && p.opt.Production:
		p.fail(e["secret"], path+".secret", "an inline secret is refused in production: use secret_env or secret_file")
	}
	if s.SecretEnv != "" && !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(s.SecretEnv) {
		p.fail(e["secret_env"], path+".secret_env", "%q is not an environment variable name", s.SecretEnv)
	}
	if v, ok := e["max_concurrency"]; ok {
		c, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil || c < 1 || c > MaxConcurrency {
			p.fail(v, path+".max_concurrency", "must be a whole number from 1 to %d", MaxConcurrency)
		}
		s.MaxConcurrency = c
	} else {
		p.fail(n, path+".max_concurrency", "missing: how many tasks this credential may run at once")
	}
	if v, ok := e["draining"]; ok {
		b, err := strconv.ParseBool(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil {
			p.fail(v, path+".draining", "must be true or false")
		}
		s.Draining = b
	}
	if v, ok := e["models"]; ok {
		s.Models = p.models(v, path+".models", s.Kind)
	} else {
		p.fail(n, path+".models", "missing: the model aliases this credential serves")
	}
	return s
}

func (p *parser) str(e map[string]*yaml.Node, parent *yaml.Node, path, key string, required bool) string {
	v, ok := e[key]
	if !ok {
		if required {
			p.fail(parent, path+"."+key, "missing")
		}
		return ""
	}
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		p.fail(v, path+"."+key, "must be a single value")
		return ""
	}
	if strings.TrimSpace(v.Value) == "" {
		p.fail(v, path+"."+key, "must not be empty")
	}
	return strings.TrimSpace(v.Value)
}

func (p *parser) baseURL(n *yaml.Node, path, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		p.fail(n, path, "%q must be an absolute http(s) URL", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		p.fail(n, path, "must not carry credentials, a query or a fragment (the secret goes in secret_env or secret_file)")
	case p.opt.Production && u.Scheme != "https" && !loopback(u.Hostname()):
		p.fail(n, path, "must be https in production (the secret travels with every call)")
	}
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

var modelKeys = []string{"upstream_model", "cost_per_second", "cost_per_million_tokens", "seconds", "sizes", "inputs", "audio", "size_map"}

func (p *parser) models(n *yaml.Node, path, kind string) map[string]Model {
	out := map[string]Model{}
	e := p.entries(n, path)
	if n.Kind == yaml.MappingNode && len(e) == 0 {
		p.fail(n, path, "must name at least one model alias")
	}
	aliases := make([]string, 0, len(e))
	for a := range e {
		aliases = append(aliases, a)
	}
	sort.Strings(aliases)
	for _, alias := range aliases {
		v, key := e[alias], path+"."+alias
		if _, ok := catalog.Lookup(alias); !ok {
			p.fail(v, key, "%q is not a public model alias (GET /v1/models lists them)", alias)
			continue
		}
		me := p.entries(v, key, modelKeys...)
		if v.Kind != yaml.MappingNode {
			continue
		}
		m := Model{UpstreamModel: p.str(me, v, key, "upstream_model", true), Line: v.Line}
		m.CostPerSecond = p.cost(me, v, key, "cost_per_second", true)
		m.CostPerMillionTokens = p.cost(me, v, key, "cost_per_million_tokens", false)
		p.capabilities(me, key, alias, &m)
		if m.UpstreamModel != "" {
			p.routeCaps(v, me, key, kind, alias, &m)
		}
		out[alias] = m
	}
	return out
}

// The bounds of a route's seconds: the durations the API sells (docs/api.md).
const (
	minSeconds = upstream.MinSeconds
	maxSeconds = upstream.MaxSeconds
)

var sizePattern = regexp.MustCompile(`^[1-9][0-9]{1,4}x[1-9][0-9]{1,4}$`)

// capabilities reads what a route declares its upstream model renders: seconds, sizes, inputs, audio
// and size_map. A size must be one the alias sells (a typo would otherwise sell nothing, silently); a
// size_map sells one of the alias's sizes as another size the model renders.
func (p *parser) capabilities(e map[string]*yaml.Node, path, alias string, m *Model) {
	model, _ := catalog.Lookup(alias)
	sold := model.Sizes()
	sells := func(size string) bool {
		for _, s := range sold {
			if s == size {
				return true
			}
		}
		return false
	}
	soldList := func() string {
		var out []string
		for _, r := range catalog.Ratios {
			out = append(out, sold[r])
		}
		return strings.Join(out, ", ")
	}
	if v, ok := e["seconds"]; ok {
		for _, item := range p.list(v, path+".seconds") {
			n, err := strconv.Atoi(item.Value)
			if item.Kind != yaml.ScalarNode || err != nil || n < minSeconds || n > maxSeconds {
				p.fail(item, path+".seconds", "%q must be a whole number of seconds from %d to %d", item.Value, minSeconds, maxSeconds)
				continue
			}
			if containsInt(m.Seconds, n) {
				p.fail(item, path+".seconds", "%d is listed twice", n)
				continue
			}
			m.Seconds = append(m.Seconds, n)
		}
		if m.Seconds == nil {
			m.Seconds = []int{}
		}
	}
	if v, ok := e["sizes"]; ok {
		for _, item := range p.list(v, path+".sizes") {
			switch {
			case item.Kind != yaml.ScalarNode || !sizePattern.MatchString(item.Value):
				p.fail(item, path+".sizes", "%q must be a size as WIDTHxHEIGHT, e.g. 1280x720", item.Value)
			case !sells(item.Value):
				p.fail(item, path+".sizes", "%s is not a size of %s (its sizes: %s); to sell one of those as %s, use size_map", item.Value, alias, soldList(), item.Value)
			case contains(m.Sizes, item.Value):
				p.fail(item, path+".sizes", "%s is listed twice", item.Value)
			default:
				m.Sizes = append(m.Sizes, item.Value)
			}
		}
		if m.Sizes == nil {
			m.Sizes = []string{}
		}
	}
	if v, ok := e["inputs"]; ok {
		// An empty list is a model that takes a prompt only.
		items := v.Content
		if v.Kind != yaml.SequenceNode {
			items = p.list(v, path+".inputs")
		}
		for _, item := range items {
			switch {
			case item.Kind != yaml.ScalarNode || !contains(upstream.Inputs, item.Value):
				p.fail(item, path+".inputs", "%q is not an input (inputs: %s)", item.Value, strings.Join(upstream.Inputs, ", "))
			case contains(m.Inputs, item.Value):
				p.fail(item, path+".inputs", "%s is listed twice", item.Value)
			default:
				m.Inputs = append(m.Inputs, item.Value)
			}
		}
		if m.Inputs == nil {
			m.Inputs = []string{}
		}
	}
	if v, ok := e["audio"]; ok {
		b, err := strconv.ParseBool(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil {
			p.fail(v, path+".audio", "must be true (the model can render sound) or false")
		}
		m.Audio = &b
	}
	if v, ok := e["size_map"]; ok {
		m.SizeMap = map[string]string{}
		for from, to := range p.entries(v, path+".size_map") {
			switch {
			case !sells(from):
				p.fail(to, path+".size_map."+from, "%s is not a size of %s (its sizes: %s)", from, alias, soldList())
			case to.Kind != yaml.ScalarNode || !sizePattern.MatchString(to.Value):
				p.fail(to, path+".size_map."+from, "%q must be the size the model renders instead, as WIDTHxHEIGHT", to.Value)
			default:
				m.SizeMap[from] = to.Value
			}
		}
	}
}

// list returns a sequence's items, reporting anything else.
func (p *parser) list(n *yaml.Node, path string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, path, "must be a list, e.g. [4, 8]")
		return nil
	}
	if len(n.Content) == 0 {
		p.fail(n, path, "must not be empty (leave the key out for the kind's defaults)")
	}
	return n.Content
}

func containsInt(list []int, n int) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// cost reads a dollar amount ("0.18", quoted or not) exactly, as micro-dollars.
func (p *parser) cost(e map[string]*yaml.Node, parent *yaml.Node, path, key string, required bool) money.Micros {
	v, ok := e[key]
	if !ok {
		if required {
			p.fail(parent, path+"."+key, "missing: what the provider charges, in USD (e.g. \"0.18\")")
		}
		return 0
	}
	m, err := money.ParseUSD(v.Value)
	if v.Kind != yaml.ScalarNode || err != nil || m < 0 {
		p.fail(v, path+"."+key, "%q must be a non-negative amount in USD with at most six decimals, e.g. \"0.18\"", v.Value)
		return 0
	}
	return m
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Resolve reads each spec's secret from its environment variable (through getenv) or its file. An
// unset variable or an unreadable or empty file is an error naming the variable or file, never a value.
func Resolve(name string, specs []Spec, getenv func(string) string) error {
	var errs []error
	for i := range specs {
		s := &specs[i]
		switch {
		case s.SecretEnv != "":
			s.Secret = strings.TrimSpace(getenv(s.SecretEnv))
			if s.Secret == "" {
				errs = append(errs, fmt.Errorf("%s:%d: upstreams[%d].secret_env: the environment variable %s is not set or empty", name, s.Line, i, s.SecretEnv))
			}
		case s.SecretFile != "":
			b, err := os.ReadFile(s.SecretFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: upstreams[%d].secret_file: %w", name, s.Line, i, err))
				continue
			}
			s.Secret = strings.TrimSpace(string(b))
			if s.Secret == "" {
				errs = append(errs, fmt.Errorf("%s:%d: upstreams[%d].secret_file: %s is empty", name, s.Line, i, s.SecretFile))
			}
		}
	}
	return errors.Join(errs...)
}

// Load reads, parses and resolves the file at path.
func Load(path string, opt Options, getenv func(string) string) ([]Spec, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("UPSTREAMS_FILE: %w", err)
	}
	specs, err := Parse(path, text, opt)
	if err != nil {
		return nil, err
	}
	if err := Resolve(path, specs, getenv); err != nil {
		return nil, err
	}
	return specs, nil
}
