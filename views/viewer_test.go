package views

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"
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
