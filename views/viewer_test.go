package views

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"videogen/models"
)

func TestPromptPreview(t *testing.T) {
	sixty := strings.Repeat("é", 60)
	for _, tc := range []struct{ in, want string }{
		{"a calm sea", "a calm sea"},
		{sixty, sixty}, // exactly 60 characters: whole
		{sixty + "x", strings.Repeat("é", 59) + "…"},
		{strings.Repeat("ab ", 30), strings.TrimSpace(strings.Repeat("ab ", 20)) + "…"}, // no space before the ellipsis
		{strings.Repeat("😀", 70), strings.Repeat("😀", 59) + "…"},                        // never splits a character
	} {
		got := PromptPreview(tc.in)
		if got != tc.want || !utf8.ValidString(got) || utf8.RuneCountInString(got) > 60 {
			t.Errorf("PromptPreview(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if cut := PromptCut(tc.in); cut != (got != tc.in) {
			t.Errorf("PromptCut(%q) = %v", tc.in, cut)
		}
	}
}

// TestFieldDescribedBy: a field points assistive technology at its error when it has one, else at its
// hint, once (the attribute was once written twice, with a stray " else" attribute beside it).
func TestFieldDescribedBy(t *testing.T) {
	for _, c := range []struct{ hint, err, want string }{
		{"", "", ""}, {"a hint", "", `aria-describedby="f-hint"`}, {"a hint", "wrong", `aria-describedby="f-error"`}, {"", "wrong", `aria-describedby="f-error"`},
	} {
		var b strings.Builder
		if err := Field("f", "F", "text", "", c.hint, c.err, false, "off").Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		html := b.String()
		if strings.Count(html, "aria-describedby") != min(1, len(c.want)) || !strings.Contains(html, c.want) || strings.Contains(html, " else") {
			t.Errorf("hint %q, error %q: %s", c.hint, c.err, html)
		}
	}
}

// TestEventDetailForCustomers: the task-log lines the worker writes for staff reach a customer in plain
// words — never the provider's name, codes or text, never the upstream cost, never a credential.
func TestEventDetailForCustomers(t *testing.T) {
	cases := []struct {
		detail, from, to string
		want             string
	}{
		{"submission attempt 1 on upstream credential ark-main (model seedance-2-0-pro), idempotency key k (worker w)", "queued", "queued", "sent to the generation service (attempt 1)"},
		{"submission attempt 2: no clear answer (ark submit: HTTP 502); will retry with the same key", "queued", "queued", "the generation service did not answer clearly; retrying safely, without starting a second video"},
		{"refused upstream: ark submit: HTTP 400 InputTextSensitiveContentDetected: BytePlus says no", "queued", "queued", "refused by the generation service"},
		{"failed upstream: OutputVideoSensitiveContentDetected the Seedance output was flagged", "in_progress", "in_progress", "the generation service reported a failure"},
		{"poll 3 failed (ark poll: connection refused to ark.example.com); next poll in 2.25s", "in_progress", "in_progress", "the generation service did not answer a status check; asking again in 2.25s"},
		{"returned to the queue: credential ark-main did not take it (HTTP 401 AuthenticationError); nothing was created upstream", "queued", "queued", "waiting for another generation slot (nothing was started or charged)"},
		{"output copied (1234 bytes); $0.50 charged; upstream cost 0.180000 (108900 tokens)", "in_progress", "completed", "output copied (1234 bytes); $0.50 charged"},
		{"cancel asked by API key vg_abcdefgh: not done, the provider cannot stop it now (ark cancel cgt-1: upstream cannot cancel the task: it is running)", "in_progress", "in_progress", "cancel asked by API key vg_abcdefgh: not done, it could not be stopped then"},
		{"cancel asked by console user a@example.com: the provider stopped the task, nothing to pay upstream", "queued", "queued", "cancel asked by console user a@example.com: stopped by the generation service"},
		{"seed not sent: veo-3.1-generate-preview takes no seed, so the video's seed is null; generate_audio echoed true: veo-3.1-generate-preview renders sound whatever is asked", "queued", "queued",
			"the seed was not used: the provider of this video takes none, so the video's seed is null; this model renders sound whatever generate_audio asks, so the video says generate_audio true"},
		{"the provider calls this failure passing (rai_media_filtered); submitting once more on upstream credential veo (worker w)", "in_progress", "in_progress",
			"the generation service filtered the video for a passing reason (its sound); trying once more, at no extra cost"},
		{"first frame cropped to 1280x720 (from 1000x1000) to match the video's size", "queued", "queued", "first frame cropped to 1280x720 (from 1000x1000) to match the video's size"},
	}
	for _, c := range cases {
		e := models.TaskEvent{Detail: c.detail, FromStatus: c.from, ToStatus: c.to}
		if got := EventDetail(e, false); got != c.want {
			t.Errorf("customer sees %q for %q, want %q", got, c.detail, c.want)
		}
		if got := EventDetail(e, true); got != c.detail {
			t.Errorf("staff see %q, want the whole line", got)
		}
	}
}
