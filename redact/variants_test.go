package redact_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/redact"
)

// TestVariants redacts the corpus of testdata/variants.jsonl: personal
// data of every category written to slip past a filter (zero-width and
// other format characters inside it, no-break and other Unicode spaces,
// digits of other scripts, look-alike letters, HTML character references,
// addresses spelled out, card numbers with dots or split by a slash). Each
// is caught whole, and the text around it is kept byte for byte.
func TestVariants(t *testing.T) {
	f, err := os.Open("testdata/variants.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := redact.New(redact.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	perCategory := map[redact.Category]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var v struct{ Name, In, Want string }
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		for _, c := range redact.Categories() {
			if strings.Contains(v.Want, c.Placeholder()) {
				perCategory[c]++
			}
		}
		t.Run(v.Name, func(t *testing.T) {
			got := r.Redact(v.In)
			if got != v.Want {
				t.Fatalf("Redact(%q)\n got %q\nwant %q", v.In, got, v.Want)
			}
			if again := r.Redact(got); again != got {
				t.Fatalf("not idempotent: %q, then %q", got, again)
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, c := range redact.Categories() {
		if perCategory[c] < 4 {
			t.Errorf("the corpus has %d variants of %s; want 4 at least", perCategory[c], c)
		}
		total += perCategory[c]
	}
	if total < 60 {
		t.Errorf("the corpus has %d variants; want 60 at least", total)
	}
}

// TestVariantsKeepTheRest: what is around a variant, format characters and
// spaces included, stays as written, and texts that only look like the
// forms read as an '@' or a '.' keep them.
func TestVariantsKeepTheRest(t *testing.T) {
	r, err := redact.New(redact.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"a\u200b \u00a0john\u200b@example.com\u200b\u00a0 b":       "a\u200b \u00a0[EMAIL]\u200b\u00a0 b",
		"x\u200b4111\u200b1111\u200b1111\u200b1111\u200by":         "x\u200b4111\u200b1111\u200b1111\u200b1111\u200by",
		"\u200b4111\u200b1111\u200b1111\u200b1111\u200b.":          "\u200b[CARD]\u200b.",
		"&amp; john at example dot com &amp;":                      "&amp; [EMAIL] &amp;",
		"I met her at example.com, at the park at 5 dot 30":        "I met her at example.com, at the park at 5 dot 30",
		"a polka dot dress at the show, (at) noon [dot] [at]":      "a polka dot dress at the show, (at) noon [dot] [at]",
		"Ask @ann or @ the desk; 3 @ 5.99 each":                    "Ask @ann or @ the desk; 3 @ 5.99 each",
		"\u041c\u043e\u0441\u043a\u0432\u0430 \u0410\u0412 123456": "\u041c\u043e\u0441\u043a\u0432\u0430 \u0410\u0412 123456",
		"pages 12 / 14, 2023 / 05 / 08, 1 | 2 | 3":                 "pages 12 / 14, 2023 / 05 / 08, 1 | 2 | 3",
		"090-1234-5678 / 03-1234-5678":                             "[PHONE] / [PHONE]",
		"4111 1111 1111 1111 / 5555 5555 5555 4444":                "[CARD] / [CARD]",
		"4111 1111 / 1111 1112":                                    "4111 1111 / 1111 1112",
		"version 4111.1111.1111.1112":                              "version 4111.1111.1111.1112",
	} {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", in, got, want)
		}
	}
}
