package redact_test

import (
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/redact"
)

// locomo is the LoCoMo development split (see the README beside it), which
// the project may not copy: read from the shared data beside the checkout.
var locomo = flag.String("locomo", "../../shared/data/locomo/locomo-dev.json", "LoCoMo JSON file for BenchmarkRedactLoCoMo")

// BenchmarkRedactLoCoMo redacts every turn (and image caption),
// observation and session summary of the LoCoMo development conversations,
// which hold no personal data of the kinds redacted: each placeholder is a
// false positive. It reports their
// number (redactions/op, and one metric per category) and fails when there
// are more than were measured when the normalisation of variants was added.
func BenchmarkRedactLoCoMo(b *testing.B) {
	raw, err := os.ReadFile(*locomo)
	if err != nil {
		b.Fatalf("%v: give the LoCoMo development file with -locomo", err)
	}
	var convs []struct {
		Conversation map[string]json.RawMessage                `json:"conversation"`
		Observation  map[string]map[string][][]json.RawMessage `json:"observation"`
		Summary      map[string]string                         `json:"session_summary"`
	}
	if err := json.Unmarshal(raw, &convs); err != nil {
		b.Fatal(err)
	}
	var texts []string
	size := 0
	add := func(ss ...string) {
		for _, s := range ss {
			if s != "" {
				texts = append(texts, s)
				size += len(s)
			}
		}
	}
	for _, c := range convs {
		for _, v := range c.Conversation {
			var turns []struct {
				Text    string `json:"text"`
				Caption string `json:"blip_caption"`
			}
			if json.Unmarshal(v, &turns) != nil {
				continue // speaker names and dates
			}
			for _, t := range turns {
				add(t.Text, t.Caption)
			}
		}
		for _, speakers := range c.Observation {
			for _, facts := range speakers {
				for _, f := range facts {
					var fact string
					if len(f) > 0 && json.Unmarshal(f[0], &fact) == nil {
						add(fact)
					}
				}
			}
		}
		for _, s := range c.Summary {
			add(s)
		}
	}
	if len(texts) < 1000 {
		b.Fatalf("%s: %d texts; is it the LoCoMo development file?", *locomo, len(texts))
	}
	r, err := redact.New(redact.Rules{})
	if err != nil {
		b.Fatal(err)
	}
	found := map[redact.Category]int{}
	total := 0
	for _, s := range texts {
		out := r.Redact(s)
		for _, c := range redact.Categories() {
			if n := strings.Count(out, c.Placeholder()) - strings.Count(s, c.Placeholder()); n > 0 {
				found[c] += n
				total += n
				b.Logf("%s: %q", c, s)
			}
		}
	}
	b.SetBytes(int64(size))
	for b.Loop() {
		for _, s := range texts {
			r.Redact(s)
		}
	}
	b.ReportMetric(float64(total), "redactions/op")
	for _, c := range redact.Categories() {
		b.ReportMetric(float64(found[c]), string(c)+"/op")
	}
	if total > maxLoCoMoRedactions {
		b.Errorf("%d redactions in %d texts of LoCoMo; there were %d", total, len(texts), maxLoCoMoRedactions)
	}
}

// maxLoCoMoRedactions is the number of false positives measured on the
// LoCoMo development conversations, before and after the normalisation of
// variants (normalize) was added.
const maxLoCoMoRedactions = 0
