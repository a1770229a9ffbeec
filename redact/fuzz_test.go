package redact_test

import (
	"testing"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/redact"
)

// FuzzRedact checks that Redact never panics, keeps valid UTF-8 valid, and
// is idempotent: redacting its output changes nothing.
func FuzzRedact(f *testing.F) {
	for _, tc := range cases {
		f.Add(tc.in)
	}
	for _, s := range []string{
		"", "[EMAIL]", "[EMAIL", "+", "(", "((0", "+(1)", "0-0-0", "1.2.3.4.5.6.7.8.9",
		"a@b.co1.2.3.4", "1::2::3", "〒", "区1-", "4111 1111 1111 1111 1111 1111",
		"\xff\xfe０９０－１２３４－５６７８\xff", "ー1ー2ー", "[1] ann (2023-05-08 15:04)",
		"john [at] example [dot] com", "a at b dot c at d dot e", "&#64;&#x40;&commat;&", "j\u200bо\u00a0@ ex.co",
		"4111 1111 / 1111 1111 | 1111", "٠٩٠-١٢٣٤-٥٦٧٨", "[at] (dot) {at}<dot>@ @",
	} {
		f.Add(s)
	}
	r, err := redact.New(redact.Rules{Patterns: []redact.Pattern{{Name: "EMPLOYEE", Regex: `EMP-[0-9]{4,8}`}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := r.Redact(s)
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("Redact(%q) = %q: not valid UTF-8", s, out)
		}
		if again := r.Redact(out); again != out {
			t.Fatalf("not idempotent:\n  in    %q\n  once  %q\n  twice %q", s, out, again)
		}
	})
}
