package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/kioku-ai/kioku/model"
)

// The answerer's and the judge's prompts of bench qa, and the offline
// judge. docs/benchmarks.md publishes both prompts word for word (a docs
// test compares them), so that a judged figure can be reproduced.

// qaAnswerSystem is the answerer's system instruction.
const qaAnswerSystem = `You answer a question about a person from what a memory service recalled of their past conversations. Use only the recalled items below; each starts with the date it was said or happened. Resolve relative dates ("last week") against that date. Answer in as few words as you can (a name, a date, a short phrase). If the items do not say, answer "unknown".`

// qaJudgeSystem is the judge's system instruction.
const qaJudgeSystem = `You grade an answer to a question about past conversations against the gold answer. Label it CORRECT when it states what the gold answer states, even in other words, at another length, or with a date in another format or a relative date that resolves to the gold one; label it WRONG when it contradicts the gold answer, misses its point, or says it does not know while the gold answer gives one. Reply with JSON: {"label": "CORRECT"} or {"label": "WRONG"}.`

// qaAnswerPrompt is the answerer's message: the items recalled (one a
// line), the question's date when it has one, and the question.
func qaAnswerPrompt(items []string, q qaQuestion) string {
	var b strings.Builder
	b.WriteString("Recalled:\n")
	if len(items) == 0 {
		b.WriteString("(nothing)\n")
	}
	for _, it := range items {
		b.WriteString("- " + it + "\n")
	}
	if !q.date.IsZero() {
		b.WriteString("\nToday is " + q.date.Format("2 January 2006") + ".\n")
	}
	b.WriteString("\nQuestion: " + q.question + "\nAnswer:")
	return b.String()
}

// qaJudgePrompt is the judge's message.
func qaJudgePrompt(q qaQuestion, answer string) string {
	return "Question: " + q.question + "\nGold answer: " + q.answer + "\nAnswer: " + answer
}

// estimateTokens estimates the tokens of a text as a model's tokenizer
// would count them: about four bytes a token, the usual rule for English.
// It counts every answerer's prompt the same way, whatever the provider,
// and prompts that were never sent (with no answerer).
func estimateTokens(s string) int { return (len(s) + 3) / 4 }

// qaVerdict is what a judge decided of one answer.
type qaVerdict struct {
	correct bool
	// f1 is the token F1 of the answer against the gold answer; negative
	// when the answer is the recalled items (no answerer), whose F1 says
	// nothing.
	f1 float64
}

// normalizeAnswer lowers a text, drops its punctuation and the articles
// "a", "an" and "the", and returns its words (SQuAD's normalisation).
func normalizeAnswer(s string) []string {
	var words []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
		switch w {
		case "a", "an", "the":
			continue
		}
		words = append(words, w)
	}
	return words
}

// containsWords reports whether want's words appear in got, in order and
// next to each other.
func containsWords(got, want []string) bool {
	if len(want) == 0 {
		return false
	}
	for i := 0; i+len(want) <= len(got); i++ {
		match := true
		for j, w := range want {
			if got[i+j] != w {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// tokenF1 is the F1 of got's words against want's, counted as bags.
func tokenF1(got, want []string) float64 {
	counts := map[string]int{}
	for _, w := range want {
		counts[w]++
	}
	common := 0
	for _, w := range got {
		if counts[w] > 0 {
			counts[w]--
			common++
		}
	}
	if common == 0 {
		return 0
	}
	p, r := float64(common)/float64(len(got)), float64(common)/float64(len(want))
	return 2 * p * r / (p + r)
}

// judgeExact is the offline judge. An answer of a model is correct when
// it contains the gold answer's words (normalised, in order) or its token
// F1 against them is at least 0.5; the recalled items, when no model
// answers (context is true), are correct when they contain the gold
// answer's words.
func judgeExact(gold, answer string, context bool) qaVerdict {
	g, a := normalizeAnswer(gold), normalizeAnswer(answer)
	if context {
		return qaVerdict{correct: containsWords(a, g), f1: -1}
	}
	f1 := tokenF1(a, g)
	return qaVerdict{correct: containsWords(a, g) || f1 >= 0.5, f1: f1}
}

// qaJudgeReply is the judge model's reply.
type qaJudgeReply struct {
	Label string `json:"label" jsonschema:"enum=CORRECT,enum=WRONG"`
}

// modelCall is one call of the answerer or the judge: its reply, the
// tokens of its prompt the provider reported (0: none) and how long it
// took.
type modelCall struct {
	text    string
	prompt  int
	elapsed time.Duration
}

// generate calls gen with a system instruction and one message, at
// temperature 0.
func generate(ctx context.Context, gen model.Generator, system, message string, schema bool) (modelCall, error) {
	zero := float32(0)
	req := &model.GenerateRequest{System: system, Messages: []model.Message{{Role: "user", Text: message}}, Temperature: &zero}
	if schema {
		req.Schema = model.SchemaFor(&qaJudgeReply{})
	}
	start := time.Now()
	res, err := gen.Generate(ctx, req)
	if err != nil {
		return modelCall{}, err
	}
	return modelCall{text: strings.TrimSpace(res.Text), prompt: res.PromptTokens, elapsed: time.Since(start)}, nil
}

// judgeModel asks the judge model whether answer answers q.
func judgeModel(ctx context.Context, judge model.Generator, q qaQuestion, answer string) (qaVerdict, error) {
	call, err := generate(ctx, judge, qaJudgeSystem, qaJudgePrompt(q, answer), true)
	if err != nil {
		return qaVerdict{}, fmt.Errorf("judging %q: %w", q.question, err)
	}
	var reply qaJudgeReply
	text := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(call.text), "```json"), "```")
	if err := json.Unmarshal([]byte(text), &reply); err != nil || reply.Label != "CORRECT" && reply.Label != "WRONG" {
		return qaVerdict{}, fmt.Errorf("judging %q: the judge replied %.200q, not {\"label\": \"CORRECT\"} or {\"label\": \"WRONG\"}", q.question, call.text)
	}
	v := judgeExact(q.answer, answer, false)
	v.correct = reply.Label == "CORRECT"
	return v, nil
}
