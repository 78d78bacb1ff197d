// Package money is the one way videogen counts, reads and writes US dollars: micro-dollars in an int64,
// never a float. It imports nothing of the project, so every layer may use it.
package money

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Micros is an amount of US dollars in millionths. Money is never a float anywhere in videogen.
type Micros int64

// PerUSD is one dollar in micro-dollars.
const PerUSD Micros = 1_000_000

// Cent is one cent in micro-dollars: customers' amounts (top-ups, adjustments) are whole cents.
const Cent Micros = 10_000

// String formats the amount as a decimal dollar string with six decimals: "0.480000", "-1.500000".
func (m Micros) String() string {
	sign := ""
	v := int64(m)
	if v < 0 {
		sign = "-"
		v = -v
	}
	return fmt.Sprintf("%s%d.%06d", sign, v/int64(PerUSD), v%int64(PerUSD))
}

// USD formats the amount for people: "$12.34" when whole cents, else all six decimals.
func (m Micros) USD() string {
	s := strings.TrimSuffix(m.String(), "0000")
	if strings.HasPrefix(s, "-") {
		return "-$" + s[1:]
	}
	return "$" + s
}

// Label formats the amount for a sentence: whole dollars without cents and with thousands separators
// ("$1,000", "-$5"), any other amount as USD does ("$12.50").
func (m Micros) Label() string {
	if m%PerUSD != 0 {
		return m.USD()
	}
	sign, n := "", int64(m/PerUSD)
	if n < 0 {
		sign, n = "-", -n
	}
	digits := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return sign + "$" + b.String()
}

// MarshalJSON writes the amount as a JSON string, never a number, so no client parses it as a float.
func (m Micros) MarshalJSON() ([]byte, error) {
	return []byte(`"` + m.String() + `"`), nil
}

// ErrInvalidAmount is returned by ParseUSD for text that is not a dollar amount.
var ErrInvalidAmount = errors.New("invalid amount")

// ParseUSD reads "25", "25.5", "25.000001" or "-3.10" into micro-dollars exactly (at most six decimals).
func ParseUSD(s string) (Micros, error) {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "$"))
	neg := false
	if strings.HasPrefix(s, "-") {
		neg = true
		s = s[1:]
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && frac == "") || len(frac) > 6 || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%w: %q (use dollars like 25.00)", ErrInvalidAmount, s)
	}
	if len(whole) > 12 {
		return 0, fmt.Errorf("%w: %q is too large", ErrInvalidAmount, s)
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	v := Micros(w)*PerUSD + Micros(f)
	if neg {
		v = -v
	}
	return v, nil
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
