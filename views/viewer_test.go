package views

import (
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
