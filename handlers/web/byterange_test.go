package web

import "testing"

func TestParseByteRange(t *testing.T) {
	for _, tc := range []struct {
		header          string
		first, last     int64
		ok, satisfiable bool
	}{
		{"bytes=0-99", 0, 99, true, true},
		{"bytes=100-", 100, 999, true, true},
		{"bytes=-500", 500, 999, true, true},
		{"bytes=-5000", 0, 999, true, true},
		{"bytes=900-5000", 900, 999, true, true},
		{"bytes=1000-", 0, 0, true, false},
		{"bytes=-0", 0, 0, true, false},
		{"bytes=5-1", 0, 0, false, false},
		{"bytes=0-1,5-9", 0, 0, false, false},
		{"items=0-1", 0, 0, false, false},
		{"bytes=x-y", 0, 0, false, false},
		{"bytes=-", 0, 0, false, false},
		{"bytes=-1-2", 0, 0, false, false},
		{"", 0, 0, false, false},
	} {
		first, last, ok, sat := parseByteRange(tc.header, 1000)
		if first != tc.first || last != tc.last || ok != tc.ok || sat != tc.satisfiable {
			t.Errorf("%q = %d-%d ok=%v sat=%v, want %d-%d ok=%v sat=%v", tc.header, first, last, ok, sat, tc.first, tc.last, tc.ok, tc.satisfiable)
		}
	}
}

// FuzzParseByteRange: whatever the header, a satisfiable range lies within the body.
func FuzzParseByteRange(f *testing.F) {
	for _, s := range []string{"bytes=0-99", "bytes=-5", "bytes=7-", "bytes=1-0", "bytes=99999999999999999999-"} {
		f.Add(s, int64(1000))
	}
	f.Fuzz(func(t *testing.T, header string, size int64) {
		first, last, ok, sat := parseByteRange(header, size)
		if sat && (!ok || first < 0 || last < first || last >= size) {
			t.Fatalf("%q on %d bytes: %d-%d", header, size, first, last)
		}
	})
}
