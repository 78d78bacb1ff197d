package storetext

import (
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
		cut  bool
	}{
		{"/v1/videos", 100, "/v1/videos", false},
		{"a\x00b", 10, "ab", false},
		{"caf\xe9", 10, "caf\uFFFD", false},
		{"héllo", 2, "h", true}, // never half a character
		{"héllo", 3, "hé", true},
		{"", 5, "", false},
	} {
		got, cut := Clip(tc.in, tc.n)
		if got != tc.want || cut != tc.cut || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q, %v; want %q, %v", tc.in, tc.n, got, cut, tc.want, tc.cut)
		}
	}
}

// FuzzClip: whatever goes in, what comes out is storable and within the bound.
func FuzzClip(f *testing.F) {
	f.Add("a\x00\xff\xfeé", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 {
			return
		}
		got, _ := Clip(s, n)
		if !utf8.ValidString(got) || len(got) > n {
			t.Fatalf("Clip(%q, %d) = %q", s, n, got)
		}
		for i := 0; i < len(got); i++ {
			if got[i] == 0 {
				t.Fatal("NUL kept")
			}
		}
	})
}
