package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/ark"
	"videogen/internal/domain/upstream/gemini"
	"videogen/internal/domain/upstream/openai"
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

// TestRouteCapsFromTables: a route renders its model's row, limited to the alias's own sizes, with the
// row's rules applied to the alias's resolution (Veo at 1080p: 8 s only) and its pixels where they
// differ from the catalog's (Seedance 1.0 at 1080p 16:9: 1920x1088).
func TestRouteCapsFromTables(t *testing.T) {
	caps := func(table upstream.Table, model, alias string) upstream.Capabilities {
		t.Helper()
		c, ok := upstream.RouteCaps(table[model], alias)
		if !ok {
			t.Fatalf("%s sells nothing of %s", model, alias)
		}
		return c
	}
	sora := caps(openai.Models, "sora-2", "videogen-2.0-720p")
	if fmt.Sprint(sora.Seconds) != "[4 8 12]" || !sora.Takes(upstream.InputFirstFrame) || sora.Takes(upstream.InputLastFrame) || !sora.AudioAlways || sora.Seed {
		t.Fatalf("sora-2 %+v", sora)
	}
	if fmt.Sprint(sora.Sizes) != "[1280x720 720x1280]" {
		t.Fatalf("sora-2 sells %v of 720p", sora.Sizes)
	}
	if _, ok := upstream.RouteCaps(openai.Models["sora-2"], "videogen-2.0-1080p"); ok {
		t.Fatal("sora-2 sells a 1080p size it does not render")
	}
	s20 := caps(ark.Models, "dreamina-seedance-2-0-260128", "videogen-2.0-480p")
	if s20.Seconds[0] != 4 || s20.Seconds[len(s20.Seconds)-1] != 15 || !slices.Equal(s20.Inputs, upstream.Inputs) || len(s20.Sizes) != 6 || len(s20.Rendered) != 0 {
		t.Fatalf("seedance 2.0 %+v", s20)
	}
	if _, ok := upstream.RouteCaps(ark.Models["dreamina-seedance-2-0-fast-260128"], "videogen-2.0-1080p"); ok {
		t.Fatal("seedance 2.0 fast sells 1080p")
	}
	pro15 := caps(ark.Models, "seedance-1-5-pro-251215", "videogen-2.0-720p")
	if fmt.Sprint(pro15.Seconds) != "[4 5 6 7 8 9 10 11 12]" || pro15.Takes(upstream.InputReferenceVideos) || pro15.Takes(upstream.InputReferenceAudio) || !pro15.Audio {
		t.Fatalf("seedance 1.5 pro %+v", pro15)
	}
	pro10 := caps(ark.Models, "seedance-1-0-pro-250528", "videogen-2.0-1080p")
	if pro10.Audio || pro10.Expected("1920x1080") != "1920x1088" || pro10.Expected("1440x1440") != "1440x1440" {
		t.Fatalf("seedance 1.0 pro %+v", pro10)
	}
	lite := caps(ark.Models, "seedance-1-0-lite-i2v-250428", "videogen-2.0-1080p")
	if lite.Takes(upstream.InputReferenceImages) || !lite.Takes(upstream.InputFirstFrame) {
		t.Fatalf("seedance 1.0 lite takes reference images at 1080p: %+v", lite.Inputs)
	}
	veo := caps(gemini.Models, "veo-3.1-generate-preview", "videogen-2.0-1080p")
	if fmt.Sprint(veo.Seconds) != "[8]" || fmt.Sprint(veo.Sizes) != "[1920x1080 1080x1920]" || fmt.Sprint(veo.Notes) != "[1080p: 8 s only]" {
		t.Fatalf("veo 3.1 at 1080p %+v", veo)
	}
	if fast := caps(gemini.Models, "veo-3.1-fast-generate-preview", "videogen-2.0-720p"); fast.Takes(upstream.InputReferenceImages) {
		t.Fatal("veo 3.1 fast takes reference images")
	}
	if lite := caps(gemini.Models, "veo-3.1-lite-generate-preview", "videogen-2.0-720p"); fmt.Sprint(lite.Seconds) != "[4 6 8]" || !lite.Takes(upstream.InputLastFrame) {
		t.Fatalf("veo 3.1 lite %+v", lite)
	}
}

// TestCouplingRules: each documented coupling rule is refused at create, naming the field and what would
// be accepted — and its edge is accepted.
func TestCouplingRules(t *testing.T) {
	img := "https://media.example/a.png"
	veo, _ := upstream.RouteCaps(gemini.Models["veo-3.1-generate-preview"], "videogen-2.0-720p")
	s20, _ := upstream.RouteCaps(ark.Models["dreamina-seedance-2-0-260128"], "videogen-2.0-720p")
	// A route whose first frame is bounded on one side only: the refusal says "at most", not "0 to".
	capped := s20
	capped.Limits = maps.Clone(s20.Limits)
	capped.Limits[upstream.InputFirstFrame] = upstream.InputLimit{Max: 1, MaxSide: 4000, MaxMs: 0}
	req := func(secs int, size string, in models.TaskInputs) models.VideoRequest {
		return models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "p", Seconds: secs, Size: size, TaskInputs: in}
	}
	video := func(w, h int, ms int64) models.MediaProbe {
		return models.MediaProbe{Field: "video_urls", ContentType: "video/mp4", Bytes: 1 << 20, Width: w, Height: h, DurationMs: ms}
	}
	cases := []struct {
		name        string
		caps        upstream.Capabilities
		req         models.VideoRequest
		code, param string // "" param: accepted
		msg         string
	}{
		{"veo first + last at 4 s", veo, req(4, "720x1280", models.TaskInputs{StartImageURL: img, EndImageURL: img}), upstream.CodeUnsupportedValue, "seconds",
			"renders 8 seconds only (first + last frame: 8 s only)"},
		{"veo first + last at 8 s", veo, req(8, "720x1280", models.TaskInputs{StartImageURL: img, EndImageURL: img}), "", "", ""},
		{"veo first frame at 4 s", veo, req(4, "720x1280", models.TaskInputs{StartImageURL: img}), "", "", ""},
		{"veo references in portrait", veo, req(8, "720x1280", models.TaskInputs{ImageURLs: []string{img}}), upstream.CodeUnsupportedValue, "size",
			"renders 1280x720 only (reference images: 8 s, 16:9 only)"},
		{"veo references at 6 s", veo, req(6, "1280x720", models.TaskInputs{ImageURLs: []string{img}}), upstream.CodeUnsupportedValue, "seconds", "8 seconds only"},
		{"veo references at 8 s, 16:9", veo, req(8, "1280x720", models.TaskInputs{ImageURLs: []string{img, img, img}}), "", "", ""},
		{"veo last frame alone", veo, req(8, "1280x720", models.TaskInputs{EndImageURL: img}), "", "end_image_url", "needs a first frame"},
		{"ark frames with references", s20, req(5, "1280x720", models.TaskInputs{StartImageURL: img, VideoURLs: []string{img}}), "", "start_image_url", "not both"},
		{"ark audio alone", s20, req(5, "1280x720", models.TaskInputs{AudioURLs: []string{img}}), "", "audio_urls", "needs reference images (image_urls) or reference videos (video_urls)"},
		{"ark reference video of a 1080p remix", s20, req(5, "1280x720", models.TaskInputs{VideoURLs: []string{img}, Media: []models.MediaProbe{video(1920, 1080, 5000)}}),
			upstream.CodeUnsupportedValue, "video_urls[0]", "2073600 pixels"},
		{"ark reference video at the pixel ceiling", s20, req(5, "1280x720", models.TaskInputs{VideoURLs: []string{img}, Media: []models.MediaProbe{video(834, 1112, 15000)}}), "", "", ""},
		{"ark reference video at the pixel floor", s20, req(5, "1280x720", models.TaskInputs{VideoURLs: []string{img}, Media: []models.MediaProbe{video(640, 640, 2000)}}), "", "", ""},
		{"ark reference video too short", s20, req(5, "1280x720", models.TaskInputs{VideoURLs: []string{img}, Media: []models.MediaProbe{video(640, 640, 1999)}}),
			upstream.CodeUnsupportedValue, "video_urls[0]", "lasts 1.999 s"},
		{"ark reference videos over 15 s together", s20, req(5, "1280x720", models.TaskInputs{VideoURLs: []string{img, img},
			Media: []models.MediaProbe{video(640, 640, 8000), {Field: "video_urls", Position: 1, ContentType: "video/mp4", Width: 640, Height: 640, DurationMs: 8000}}}),
			upstream.CodeUnsupportedValue, "video_urls", "at most 15 s together"},
		{"ark reference video as WebM", s20, req(5, "1280x720", models.TaskInputs{VideoURLs: []string{img}, Media: []models.MediaProbe{{Field: "video_urls", ContentType: "video/webm"}}}),
			upstream.CodeUnsupportedValue, "video_urls[0]", "video/mp4 or video/quicktime"},
		{"ark tiny first frame", s20, req(5, "1280x720", models.TaskInputs{StartImageURL: img, Media: []models.MediaProbe{{Field: "start_image_url", ContentType: "image/png", Width: 200, Height: 200}}}),
			upstream.CodeUnsupportedValue, "start_image_url", "300 to 6000 pixels a side"},
		{"a side over a one-sided bound", capped, req(5, "1280x720", models.TaskInputs{StartImageURL: img, Media: []models.MediaProbe{{Field: "start_image_url", ContentType: "image/png", Width: 4200, Height: 200}}}),
			upstream.CodeUnsupportedValue, "start_image_url", "takes a first frame (start_image_url) of at most 4000 pixels a side"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := upstream.Refusal([]upstream.Capabilities{c.caps}, c.req)
			if c.param == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !c.caps.Renders(c.req) {
					t.Fatal("not refused, but the route does not render it")
				}
				return
			}
			if err == nil || err.Code != c.code || err.Param != c.param || !strings.Contains(err.Message, c.msg) {
				t.Fatalf("got %+v, want %s %s: %q", err, c.code, c.param, c.msg)
			}
			if c.caps.Renders(c.req) {
				t.Fatal("refused, but the route renders it")
			}
		})
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

// blockingPoll answers a poll with err once release is closed, saying on polling that it was sent.
type blockingPoll struct {
	fakeProvider
	polling chan struct{}
	release chan struct{}
	err     error
}

func (b *blockingPoll) Poll(context.Context, upstream.Credential, string) (upstream.Status, error) {
	b.polling <- struct{}{}
	<-b.release
	return upstream.Status{}, b.err
}

// TestStaleRefusalAfterReload: a refused key's answer to a call sent before the operator's reload speaks
// of the key as it was; landing after the reload, it must not mark the fixed credential again (a poll in
// flight while the operator reloaded once left a repaired pool refusing every create for a minute). A
// refusal of a call sent after the reload still marks it.
func TestStaleRefusalAfterReload(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		d := testkit.OpenDB(t, dbURL)
		ctx := context.Background()
		h := upstream.NewHealth(upstream.HealthConfig{Failures: 50, Cooldown: time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
		provider := &blockingPoll{polling: make(chan struct{}, 1), release: make(chan struct{}), err: fmt.Errorf("%w: HTTP 401 invalid_api_key", upstream.ErrAuth)}
		cred := upstream.Credential{ID: "c", Kind: "openai", Secret: "sk-secret-1", MaxConcurrency: 2,
			Models: map[string]upstream.Route{"videogen-2.0-720p": {UpstreamModel: "m", Caps: openAICaps}}, Provider: provider}
		pool := upstream.NewPool(d, h, []upstream.Credential{cred})
		if err := pool.Sync(ctx, []upstream.Credential{cred}, false, time.Now()); err != nil {
			t.Fatal(err)
		}
		req := models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "p", Seconds: 4, Size: "1280x720"}
		refused := func() bool {
			var row models.UpstreamCredential
			if err := d.R.Where("id = ?", "c").Take(&row).Error; err != nil {
				t.Fatal(err)
			}
			return row.AuthError != nil || len(pool.Candidates(req)) == 0
		}

		polled := make(chan error, 1)
		go func() { _, err := pool.Poll(ctx, cred, "u1"); polled <- err }()
		<-provider.polling // sent before the reload
		if err := pool.Sync(ctx, []upstream.Credential{cred}, true, time.Now()); err != nil {
			t.Fatal(err)
		}
		pool.Replace([]upstream.Credential{cred})
		close(provider.release)
		if err := <-polled; !errors.Is(err, upstream.ErrAuth) {
			t.Fatalf("the stale poll: %v", err)
		}
		if err := h.Refresh(ctx, d, []string{"c"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		if refused() {
			t.Fatal("a refusal of a call sent before the reload marked the reloaded credential")
		}

		// Sent after the reload, the same refusal marks it.
		go func() { _, err := pool.Poll(ctx, cred, "u1"); polled <- err }()
		<-provider.polling
		if err := <-polled; !errors.Is(err, upstream.ErrAuth) {
			t.Fatalf("the fresh poll: %v", err)
		}
		if !refused() {
			t.Fatal("a refusal after the reload did not mark the credential")
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
