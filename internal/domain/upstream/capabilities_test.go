package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/poolfile"
	"videogen/internal/domain/upstream/providers"
	"videogen/internal/testkit"
	"videogen/models"
)

var (
	openAICaps = upstream.Capabilities{Seconds: []int{4, 8, 12}, Sizes: []string{"720x1280", "1280x720", "1024x1792", "1792x1024"},
		Inputs: []string{upstream.InputFirstFrame}, Audio: true}
	silentCaps = upstream.Capabilities{Seconds: []int{5, 10}, Sizes: []string{"1280x720", "960x960"}, Inputs: nil, Audio: false,
		SizeMap: map[string]string{"720x1280": "768x1344"}}
)

// TestRefusal: a request no route renders is refused naming the first field, in the order seconds,
// size, inputs, generate_audio, that none of the routes still in question accepts, and what they accept.
func TestRefusal(t *testing.T) {
	req := func(secs int, size string, audio bool, in models.TaskInputs) models.VideoRequest {
		return models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "p", Seconds: secs, Size: size, GenerateAudio: audio, TaskInputs: in}
	}
	first := models.TaskInputs{StartImageURL: "https://x/first"}
	cases := []struct {
		name  string
		caps  []upstream.Capabilities
		req   models.VideoRequest
		param string // "" when accepted
		msg   string
	}{
		{"accepted by openai", []upstream.Capabilities{openAICaps}, req(8, "1280x720", false, first), "", ""},
		{"seconds", []upstream.Capabilities{openAICaps}, req(5, "1280x720", false, models.TaskInputs{}), "seconds",
			"This model renders 4, 8 or 12 seconds; 5 seconds cannot be rendered. Send one of those values in seconds."},
		{"seconds of either route", []upstream.Capabilities{openAICaps, silentCaps}, req(6, "1280x720", false, models.TaskInputs{}), "seconds",
			"This model renders 4, 5, 8, 10 or 12 seconds"},
		{"the size of the routes with those seconds", []upstream.Capabilities{openAICaps, silentCaps}, req(5, "1792x1024", false, models.TaskInputs{}), "size",
			"This model renders 1280x720, 720x1280 or 960x960 at 5 seconds; 1792x1024 cannot be rendered."},
		{"a mapped size is sold", []upstream.Capabilities{silentCaps}, req(5, "720x1280", false, models.TaskInputs{}), "", ""},
		{"an input", []upstream.Capabilities{openAICaps}, req(4, "1280x720", false, models.TaskInputs{ImageURLs: []string{"https://x/ref"}}), "image_urls",
			"This model cannot take reference images (image_urls) with this request; it takes a first frame (start_image_url). Leave image_urls out."},
		{"prompt only", []upstream.Capabilities{silentCaps}, req(5, "1280x720", false, first), "start_image_url",
			"it takes no media inputs"},
		{"sound", []upstream.Capabilities{silentCaps}, req(10, "960x960", true, models.TaskInputs{}), "generate_audio",
			"This model renders silent video only. Set generate_audio to false."},
		{"sound from the other route", []upstream.Capabilities{silentCaps, openAICaps}, req(4, "1280x720", true, models.TaskInputs{}), "", ""},
		{"no single route renders all", []upstream.Capabilities{openAICaps, silentCaps}, req(5, "1280x720", true, models.TaskInputs{}), "generate_audio", "silent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := upstream.Refusal(c.caps, c.req)
			if c.param == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || err.Code != upstream.CodeUnsupportedValue || err.Param != c.param || !strings.Contains(err.Message, c.msg) {
				t.Fatalf("got %+v, want %s: %q", err, c.param, c.msg)
			}
		})
	}
}

// TestKindDefaults: a route that declares nothing renders its kind's documented defaults, limited to
// the alias's own sizes; each declared key replaces its default alone.
func TestKindDefaults(t *testing.T) {
	caps := func(kind, alias string, m poolfile.Model) upstream.Capabilities {
		return providers.Capabilities(providers.Kinds[kind], alias, m)
	}
	o := caps("openai", "videogen-2.0-720p", poolfile.Model{})
	if fmt.Sprint(o.Seconds) != "[4 8 12]" || !o.Takes(upstream.InputFirstFrame) || o.Takes(upstream.InputLastFrame) || !o.Audio {
		t.Fatalf("openai defaults %+v", o)
	}
	if got := o.SellableSizes([]string{"1470x630", "1280x720", "960x960", "720x1280"}); fmt.Sprint(got) != "[1280x720 720x1280]" {
		t.Fatalf("openai sells %v of 720p", got)
	}
	a := caps("ark", "videogen-2.0-480p", poolfile.Model{})
	if a.Seconds[0] != 4 || a.Seconds[len(a.Seconds)-1] != 15 || !slices.Equal(a.Inputs, upstream.Inputs) || len(a.Sizes) != 6 || !a.RendersSize("864x496") {
		t.Fatalf("ark defaults %+v", a)
	}
	silent := false
	d := caps("openai", "videogen-2.0-720p", poolfile.Model{Seconds: []int{8}, Audio: &silent})
	if fmt.Sprint(d.Seconds) != "[8]" || d.Audio || !d.Takes(upstream.InputFirstFrame) || !d.RendersSize("1280x720") {
		t.Fatalf("declared over defaults %+v", d)
	}
}

// fakeProvider answers every submission with err; it stands for a provider's adapter (the adapters'
// own tests hold them to the providers' wire formats).
type fakeProvider struct{ err error }

func (f fakeProvider) Submit(context.Context, upstream.Credential, upstream.SubmitRequest) (upstream.Status, error) {
	if f.err != nil {
		return upstream.Status{}, f.err
	}
	return upstream.Status{ID: "u1", State: upstream.StateQueued}, nil
}
func (f fakeProvider) Poll(context.Context, upstream.Credential, string) (upstream.Status, error) {
	return upstream.Status{}, errors.New("not polled here")
}
func (f fakeProvider) Download(context.Context, upstream.Credential, string) (io.ReadCloser, int64, error) {
	return nil, 0, errors.New("not downloaded here")
}

// TestRefusalsMarkWhatTheyAreAbout: a provider refusing one model for a key closes that route alone
// (the credential's other aliases keep taking work) until a reload; an account out of credit marks the
// whole credential, in the database as "credit" for staff, until a reload; the offer follows.
func TestRefusalsMarkWhatTheyAreAbout(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		d := testkit.OpenDB(t, dbURL)
		ctx := context.Background()
		h := upstream.NewHealth(upstream.HealthConfig{Failures: 50, Cooldown: time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
		routes := map[string]upstream.Route{
			"videogen-2.0-720p":  {UpstreamModel: "m1", Caps: openAICaps},
			"videogen-2.0-1080p": {UpstreamModel: "m2", Caps: openAICaps},
		}
		provider := &fakeProvider{}
		cred := upstream.Credential{ID: "c", Kind: "openai", Secret: "sk-secret-1", MaxConcurrency: 2, Models: routes, Provider: provider}
		pool := upstream.NewPool(d, h, []upstream.Credential{cred})
		if err := pool.Sync(ctx, []upstream.Credential{cred}, false, time.Now()); err != nil {
			t.Fatal(err)
		}
		req := func(alias string) models.VideoRequest {
			return models.VideoRequest{Model: alias, Prompt: "p", Seconds: 4, Size: "1280x720"}
		}
		submit := func(alias string) error {
			_, err := pool.Submit(ctx, cred, upstream.SubmitRequest{VideoRequest: req(alias), UpstreamModel: routes[alias].UpstreamModel})
			return err
		}

		provider.err = fmt.Errorf("%w: HTTP 403 OperationDenied.ServiceNotOpen", upstream.ErrRoute)
		if err := submit("videogen-2.0-1080p"); !errors.Is(err, upstream.ErrRoute) {
			t.Fatalf("route refusal: %v", err)
		}
		if got := pool.Candidates(req("videogen-2.0-1080p")); len(got) != 0 {
			t.Fatalf("the closed route still takes work: %v", got)
		}
		if got := pool.Candidates(req("videogen-2.0-720p")); fmt.Sprint(got) != "[c]" {
			t.Fatalf("the credential's other route: %v", got)
		}
		if _, ok := pool.Offer("videogen-2.0-1080p", map[string]string{"16:9": "1920x1080"}); ok {
			t.Fatal("a closed route is still offered")
		}
		if err := pool.Admit(req("videogen-2.0-1080p")); !errors.Is(err, upstream.ErrNotServed) {
			t.Fatalf("admit on the closed route: %v", err)
		}
		if s := h.Snapshot("c"); !strings.Contains(s.ClosedRoutes["videogen-2.0-1080p"], "ServiceNotOpen") {
			t.Fatalf("snapshot %+v", s)
		}

		provider.err = fmt.Errorf("%w: HTTP 429 insufficient_quota", upstream.ErrOutOfCredit)
		if err := submit("videogen-2.0-720p"); !errors.Is(err, upstream.ErrOutOfCredit) {
			t.Fatalf("credit refusal: %v", err)
		}
		if got := pool.Candidates(req("videogen-2.0-720p")); len(got) != 0 {
			t.Fatalf("a credential out of credit still takes work: %v", got)
		}
		var row models.UpstreamCredential
		if err := d.R.Where("id = ?", "c").Take(&row).Error; err != nil {
			t.Fatal(err)
		}
		if row.AuthErrorKind == nil || *row.AuthErrorKind != upstream.MarkCredit || row.AuthError == nil || !strings.Contains(*row.AuthError, "insufficient_quota") {
			t.Fatalf("credential row %+v", row)
		}
		var noCapacity *upstream.NoCapacityError
		if err := pool.Admit(req("videogen-2.0-720p")); !errors.As(err, &noCapacity) {
			t.Fatalf("admit while out of credit: %v", err)
		}

		// The operator tops up and reloads: both marks go.
		provider.err = nil
		if err := pool.Sync(ctx, []upstream.Credential{cred}, true, time.Now()); err != nil {
			t.Fatal(err)
		}
		pool.Replace([]upstream.Credential{cred})
		if err := h.Refresh(ctx, d, []string{"c"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		for _, alias := range []string{"videogen-2.0-720p", "videogen-2.0-1080p"} {
			if got := pool.Candidates(req(alias)); fmt.Sprint(got) != "[c]" {
				t.Fatalf("%s after the reload: %v", alias, got)
			}
		}
	})
}

// TestRateLimitsCountTowardsTheBreaker: a 429 that is not about credit is a failure of the credential
// (it keeps coming while the provider is overloaded): enough in a row open the breaker, and the
// credential takes no new task; its Retry-After is carried to the worker.
func TestRateLimitsCountTowardsTheBreaker(t *testing.T) {
	h := upstream.NewHealth(upstream.HealthConfig{Failures: 2, Cooldown: time.Minute, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	busy := &upstream.BusyError{RetryAfter: 7 * time.Second, Detail: "HTTP 429 rate_limit_exceeded"}
	cred := upstream.Credential{ID: "c", Kind: "openai", Secret: "sk-secret-1", MaxConcurrency: 2,
		Models: map[string]upstream.Route{"videogen-2.0-720p": {UpstreamModel: "m", Caps: openAICaps}}, Provider: &fakeProvider{err: busy}}
	pool := upstream.NewPool(nil, h, []upstream.Credential{cred})
	req := models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "p", Seconds: 4, Size: "1280x720"}
	for i := 0; i < 2; i++ {
		_, err := pool.Submit(context.Background(), cred, upstream.SubmitRequest{VideoRequest: req})
		if !errors.Is(err, upstream.ErrBusy) || upstream.RetryAfter(err) != 7*time.Second {
			t.Fatalf("submission %d: %v (retry after %s)", i, err, upstream.RetryAfter(err))
		}
	}
	if h.Healthy("c") || len(pool.Candidates(req)) != 0 {
		t.Fatalf("breaker %s after two 429s in a row", h.Snapshot("c").Breaker)
	}
}
