package redact

import (
	"testing"
	"unicode"
)

// TestDigitValues: digitValue reads every decimal digit of Unicode by its
// distance from the start of its range of unicode.Nd, which holds only if
// each range is whole runs of ten digits.
func TestDigitValues(t *testing.T) {
	check := func(lo, hi, stride uint32) {
		if stride != 1 || (hi-lo+1)%10 != 0 {
			t.Errorf("unicode.Nd range %#x-%#x (stride %d) is not whole runs of ten digits", lo, hi, stride)
		}
		for r := rune(lo); r <= rune(hi); r++ {
			if got, want := mapRune(r), '0'+(r-rune(lo))%10; got != want {
				t.Fatalf("mapRune(%U) = %q, want %q", r, got, want)
			}
		}
	}
	for _, r := range unicode.Nd.R16 {
		check(uint32(r.Lo), uint32(r.Hi), uint32(r.Stride))
	}
	for _, r := range unicode.Nd.R32 {
		check(r.Lo, r.Hi, r.Stride)
	}
	for r, want := range map[rune]rune{'٣': '3', '۷': '7', '९': '9', '০': '0', '７': '7', '𝟘': '0', '𝟗': '9', '7': '7'} {
		if got := mapRune(r); got != want {
			t.Errorf("mapRune(%q) = %q, want %q", r, got, want)
		}
	}
}
