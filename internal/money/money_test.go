package money

import (
	"errors"
	"testing"
)

func TestMicrosString(t *testing.T) {
	for _, tc := range []struct {
		in   Micros
		want string
		usd  string
	}{
		{0, "0.000000", "$0.00"},
		{480_000, "0.480000", "$0.48"},
		{1, "0.000001", "$0.000001"},
		{25 * PerUSD, "25.000000", "$25.00"},
		{-1_500_000, "-1.500000", "-$1.50"},
		{-1, "-0.000001", "-$0.000001"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%d.String() = %q, want %q", int64(tc.in), got, tc.want)
		}
		if got := tc.in.USD(); got != tc.usd {
			t.Errorf("%d.USD() = %q, want %q", int64(tc.in), got, tc.usd)
		}
	}
}

func TestParseUSD(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Micros
		ok   bool
	}{
		{"25", 25_000_000, true},
		{"25.00", 25_000_000, true},
		{"$25.5", 25_500_000, true},
		{"0.000001", 1, true},
		{"-3.10", -3_100_000, true},
		{" 7 ", 7_000_000, true},
		{"0.0000001", 0, false},
		{"1e3", 0, false},
		{"", 0, false},
		{".5", 0, false},
		{"5.", 0, false},
		{"1,000", 0, false},
		{"--1", 0, false},
		{"9999999999999", 0, false},
		{"abc", 0, false},
	} {
		got, err := ParseUSD(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidAmount) {
			t.Errorf("ParseUSD(%q) error %v is not ErrInvalidAmount", tc.in, err)
		}
	}
}

// FuzzParseUSD checks that every accepted amount prints back to the same value.
func FuzzParseUSD(f *testing.F) {
	for _, s := range []string{"25", "0.48", "-3.1", "$1.000001", "1e9", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseUSD(s)
		if err != nil {
			return
		}
		back, err := ParseUSD(m.String())
		if err != nil || back != m {
			t.Fatalf("%q → %d → %q → %d, %v", s, m, m.String(), back, err)
		}
	})
}

func TestLabel(t *testing.T) {
	for _, tc := range []struct {
		in   Micros
		want string
	}{
		{1 * PerUSD, "$1"}, {1000 * PerUSD, "$1,000"}, {1234567 * PerUSD, "$1,234,567"}, {0, "$0"},
		{-5 * PerUSD, "-$5"}, {12_500_000, "$12.50"}, {1, "$0.000001"}, {100 * PerUSD, "$100"},
	} {
		if got := tc.in.Label(); got != tc.want {
			t.Errorf("%d.Label() = %q, want %q", int64(tc.in), got, tc.want)
		}
	}
}
