package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/model/modeltest"
)

// tinyLocomoFile writes the tiny conversation to a file and returns its
// path.
func tinyLocomoFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.json")
	if err := os.WriteFile(path, []byte(tinyLocomo), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// category returns a category's figures of a bench qa report.
func category(t *testing.T, got map[string]any, name string) map[string]any {
	t.Helper()
	c, ok := got["by_category"].(map[string]any)[name].(map[string]any)
	if !ok {
		t.Fatalf("no category %q in %v", name, got["by_category"])
	}
	return c
}

// TestBenchQAExactOffline: with no model the recalled memories are judged
// for holding the gold answer: Ann's cat and cello are recalled, the
// question whose answer is "x" is not answered, the adversarial one is
// not asked.
func TestBenchQAExactOffline(t *testing.T) {
	got := runBench(t, "qa", "--data", tinyLocomoFile(t), "--judge", "exact", "--json")
	if got["format"] != "locomo" || got["questions"] != 4.0 || got["model_calls"] != 0.0 || got["events"] != 3.0 || got["sessions"] != 1.0 {
		t.Fatalf("bench qa: %v; want 4 questions of LoCoMo (category 5 left out), no model call, 3 events in 1 session", got)
	}
	if c := category(t, got, "single-hop"); c["questions"] != 2.0 || c["accuracy"] != 1.0 {
		t.Errorf("single-hop: %v; the memories name Miso and the cello", c)
	}
	if c := category(t, got, "temporal"); c["questions"] != 1.0 || c["accuracy"] != 0.0 {
		t.Errorf("temporal: %v; nothing says x", c)
	}
	lat := got["latency_ms"].(map[string]any)
	if got["tokens_per_question"].(float64) < 50 || lat["p50"] == nil || lat["p95"].(float64) < lat["p50"].(float64) {
		t.Errorf("tokens %v, latency %v: want the prompt's tokens and the quantiles", got["tokens_per_question"], lat)
	}
	if got["answer_ms"] != nil || got["f1"] != nil {
		t.Errorf("answer_ms %v, f1 %v with no answerer", got["answer_ms"], got["f1"])
	}
}

// TestBenchQALongMemEval reads LongMemEval's format: each item its own
// user with its haystack, the assistant's turns stored too, an _abs
// question a category of its own.
func TestBenchQALongMemEval(t *testing.T) {
	got := runBench(t, "qa", "--data", "testdata/longmemeval-sample.json", "--retrieve", "events", "--json")
	if got["format"] != "longmemeval" || got["questions"] != 2.0 || got["sessions"] != 3.0 || got["events"] != 6.0 {
		t.Fatalf("bench qa: %v; want 2 questions over 3 sessions of 6 events", got)
	}
	if c := category(t, got, "single-session-user"); c["accuracy"] != 1.0 {
		t.Errorf("single-session-user: %v; the event names Miso", c)
	}
	if c := category(t, got, "abstention"); c["questions"] != 1.0 {
		t.Errorf("abstention: %v", c)
	}
}

// TestBenchQAModel runs the answer and judge path against a fake
// OpenAI-compatible server: one answer and one verdict a question, no
// other call, the recalled memories in the answerer's prompt and the
// gold answer in the judge's.
func TestBenchQAModel(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	t.Setenv("OPENAI_API_KEY", "test-key")
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		text := c.Messages[len(c.Messages)-1].Text
		switch c.System {
		case qaAnswerSystem:
			if strings.Contains(text, "Question: What is the name of Ann's cat?") && strings.Contains(text, "Miso") {
				return modeltest.Reply{Text: "Her cat is Miso."}
			}
			return modeltest.Reply{Text: "unknown"}
		case qaJudgeSystem:
			if strings.Contains(text, "Gold answer: Miso\nAnswer: Her cat is Miso.") {
				return modeltest.Reply{Text: `{"label": "CORRECT"}`}
			}
			return modeltest.Reply{Text: `{"label": "WRONG"}`}
		}
		return modeltest.Reply{Status: 400, Text: "unexpected call"}
	})
	got := runBench(t, "qa", "--data", tinyLocomoFile(t), "--judge", "model", "--retrieve", "both",
		"--model-provider", "openai", "--openai-base-url", fake.URL, "--model", "answerer", "--judge-model", "judge", "--json")
	calls := fake.Calls()
	answers, verdicts := 0, 0
	for _, c := range calls {
		switch c.Model {
		case "answerer":
			answers++
		case "judge":
			verdicts++
		}
	}
	if len(calls) != 8 || answers != 4 || verdicts != 4 || got["model_calls"] != 8.0 || got["extraction_calls"] != 0.0 {
		t.Fatalf("%d calls (%d answers, %d verdicts), reported %v; want 4 of each", len(calls), answers, verdicts, got["model_calls"])
	}
	if got["accuracy"] != 0.25 || category(t, got, "single-hop")["accuracy"] != 0.5 {
		t.Errorf("accuracy %v, by category %v; the judge passes Miso alone", got["accuracy"], got["by_category"])
	}
	if got["answer_ms"] == nil || got["f1"] == nil {
		t.Errorf("answer_ms %v, f1 %v: want both with an answerer", got["answer_ms"], got["f1"])
	}
}

// TestBenchQAFlags: a judge or extraction by model needs a model, and
// unknown choices name the ones there are.
func TestBenchQAFlags(t *testing.T) {
	path := tinyLocomoFile(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--judge", "model"}, "--judge model needs a model"},
		{[]string{"--extract", "model"}, "--extract model needs a model"},
		{[]string{"--judge", "fuzzy"}, "use exact or model"},
		{[]string{"--retrieve", "all"}, "use memories, events or both"},
		{[]string{"--format", "csv"}, "use auto, locomo or longmemeval"},
		{[]string{"--top-k", "0"}, "use 1 to 100"},
	} {
		err := bench(t.Context(), append([]string{"qa", "--data", path}, c.args...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bench qa %v: %v; want %q", c.args, err, c.want)
		}
	}
}

func TestJudgeExact(t *testing.T) {
	for _, c := range []struct {
		gold, answer string
		context      bool
		correct      bool
	}{
		{"7 May 2023", "She went on 7 May, 2023.", false, true},
		{"Psychology, counseling certification", "psychology and counseling", false, true},
		{"The cello", "a cello", false, true},
		{"Miso", "Pochi", false, false},
		{"Bo's sister", "(1 May 2023) Bo's sister runs marathons in Boston.", true, true},
		{"Boston", "(1 May 2023) She lives in Bostonia.", true, false},
		{"", "anything", true, false},
	} {
		if got := judgeExact(c.gold, c.answer, c.context); got.correct != c.correct {
			t.Errorf("judgeExact(%q, %q, %v) = %v, want %v", c.gold, c.answer, c.context, got.correct, c.correct)
		}
	}
}

// TestBenchQAPromptsPublished: docs/benchmarks.md gives the answerer's
// and the judge's prompts as bench qa sends them.
func TestBenchQAPromptsPublished(t *testing.T) {
	doc, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, prompt := range map[string]string{"answerer": qaAnswerSystem, "judge": qaJudgeSystem} {
		if !strings.Contains(string(doc), "\n"+prompt+"\n") {
			t.Errorf("docs/benchmarks.md lacks the %s's prompt, on a line of its own:\n%s", name, prompt)
		}
	}
}
