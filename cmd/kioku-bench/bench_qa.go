package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/model"
)

const benchQAUsage = `Usage: kioku-bench qa [--data PATH] [--format auto|locomo|longmemeval] [--retrieve memories|events|both] [--top-k N] [--judge exact|model] [--extract offline|model] [--json]

Question answering end to end: what kioku recalls of a conversation, an
answer from it and a judge's verdict. kioku runs in-process on loopback
with a fresh temporary store. Each conversation (a LoCoMo sample, or a
LongMemEval question's haystack) is stored as sessions of one user, each
turn an event at its session's date, and memories are generated from each
session in turn, by the offline extractor or, with --extract model, by the
configured model. Then for each question (LoCoMo's categories 1 to 4; every
LongMemEval question) kioku is asked with RetrieveMemories (the user's
scope), SearchEvents (the user's sessions) or both, --top-k results each;
the configured model (--model-provider gemini, vertex or openai) answers
from them with the prompt of docs/benchmarks.md, and the judge grades the
answer against the gold one: --judge model asks the configured model (or
--judge-model of the same provider) with the judge prompt of
docs/benchmarks.md; --judge exact is offline (normalised containment of
the gold answer, or token F1 of at least 0.5). With no model configured
(the default, offline) nothing answers: the answer judged is the recalled
items themselves, correct when they contain the gold answer, so that the
figure is what retrieval puts within the answerer's reach.

With --json the last line is
  {"format":..., "questions":N, "accuracy":a, "by_category":{name:{"questions":N,"accuracy":a}},
   "tokens_per_question":t, "latency_ms":{"p50":x,"p95":x}, "retrieval_ms":{...},
   "answer_ms":{...}, "model_calls":N, ...}
where tokens are those of the answerer's prompt (about four bytes a
token) and latency_ms is retrieval and answer together, per question.

Flags:
`

// qaOptions are bench qa's settings.
type qaOptions struct {
	retrieve string
	topK     int
	answerer model.Generator // nil: the recalled items are the answer
	judge    model.Generator // nil: the exact judge
}

// qaResult is one question's outcome.
type qaResult struct {
	category         string
	verdict          qaVerdict
	tokens           int
	retrieval, total time.Duration
	answered         bool
}

func benchQA(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench qa", "KIOKU_", benchQAUsage)
	data := fs.String("data", "../shared/data/locomo/locomo-dev.json", "LoCoMo or LongMemEval JSON file")
	format := fs.String("format", "auto", "the data's format: auto, locomo or longmemeval")
	retrieve := fs.String("retrieve", "memories", "what the answerer is given: memories, events or both")
	topK := fs.Int("top-k", 10, "results of each retrieval")
	judgeFlag := fs.String("judge", "exact", "exact (offline) or model")
	judgeName := fs.String("judge-model", "", "the judge's model, of --model-provider's provider (default --model)")
	extract := fs.String("extract", "offline", "what generates the memories: offline (the offline extractor) or model (the configured model)")
	limit := fs.Int("questions", 0, "ask only the first N questions (0: all), to bound what a model costs")
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	flags := cli.RegisterModelFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !slices.Contains([]string{"memories", "events", "both"}, *retrieve) {
		return fmt.Errorf("--retrieve %q: use memories, events or both", *retrieve)
	}
	if *topK < 1 || *topK > 100 {
		return fmt.Errorf("--top-k %d: use 1 to 100", *topK)
	}
	if *limit < 0 {
		return fmt.Errorf("--questions %d: use 0 (all) or more", *limit)
	}
	models, err := flags.Config()
	if err != nil {
		return err
	}
	chat := models.Provider != "" && models.Provider != "offline" && models.Provider != "none"
	opts := qaOptions{retrieve: *retrieve, topK: *topK}
	if chat {
		if opts.answerer, _, err = models.Build(ctx); err != nil {
			return err
		}
	}
	switch *judgeFlag {
	case "exact":
	case "model":
		if !chat {
			return fmt.Errorf("--judge model needs a model: %s", model.Settings)
		}
		jc := models
		if *judgeName != "" {
			jc.Model = *judgeName
		}
		if opts.judge, _, err = jc.Build(ctx); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--judge %q: use exact or model", *judgeFlag)
	}
	switch *extract {
	case "offline":
		models.Provider = "offline"
	case "model":
		if !chat {
			return fmt.Errorf("--extract model needs a model: %s", model.Settings)
		}
	default:
		return fmt.Errorf("--extract %q: use offline or model", *extract)
	}
	convs, kind, err := readQA(*data, *format)
	if err != nil {
		return err
	}
	convs = firstQuestions(convs, *limit)
	env, err := startBenchNode(ctx, "sqlite", "", func(c *node.Config) { c.Models = models })
	if err != nil {
		return err
	}
	defer env.close()
	answerer := "none (the recalled items are judged)"
	if opts.answerer != nil {
		answerer = opts.answerer.Name()
	}
	judge := "exact"
	if opts.judge != nil {
		judge = opts.judge.Name()
	}
	fmt.Fprintf(stdout, "kioku-bench qa: %s (%s), retrieve %s top %d, memories by %s, answerer %s, judge %s, embedder %s\n",
		*data, kind, *retrieve, *topK, *extract, answerer, judge, env.node.Memories.EmbedderName())

	sc := env.sessions()
	mc := env.memories()
	oc := env.operations()
	var mu sync.Mutex
	sessions, events := 0, 0
	start := time.Now()
	if err := parallel(ctx, 4, len(convs), func(ctx context.Context, i int) error {
		s, e, err := ingestQA(ctx, "qa", sc, mc, oc, &convs[i])
		mu.Lock()
		sessions, events = sessions+s, events+e
		mu.Unlock()
		return err
	}); err != nil {
		return fmt.Errorf("storing the conversations: %w", err)
	}
	extractionCalls := 0
	if *extract == "model" {
		for _, u := range env.node.ModelUsage() {
			if u.Call == "generate" {
				extractionCalls += int(u.Calls)
			}
		}
	}
	memories, err := countMemories(ctx, mc, convs)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stored     %d events of %d sessions, %d memories, in %.1f s\n", events, sessions, memories, time.Since(start).Seconds())

	type job struct {
		c *qaConversation
		q qaQuestion
	}
	var jobs []job
	for i := range convs {
		for _, q := range convs[i].questions {
			jobs = append(jobs, job{&convs[i], q})
		}
	}
	if len(jobs) == 0 {
		return fmt.Errorf("no question to ask in %s", *data)
	}
	results := make([]qaResult, len(jobs))
	if err := parallel(ctx, 8, len(jobs), func(ctx context.Context, i int) error {
		r, err := askQA(ctx, sc, mc, opts, jobs[i].c, jobs[i].q)
		results[i] = r
		return err
	}); err != nil {
		return err
	}
	r := &benchReport{}
	r.set("format", kind)
	r.set("retrieve", *retrieve)
	r.set("top_k", *topK)
	qaReport(r, results, opts)
	calls := extractionCalls
	for _, res := range results {
		if res.answered {
			calls++
		}
		if opts.judge != nil {
			calls++
		}
	}
	r.set("model_calls", calls)
	r.set("extraction_calls", extractionCalls)
	r.set("memories", memories)
	r.set("sessions", sessions)
	r.set("events", events)
	printQAReport(r)
	if *asJSON {
		return r.printJSON(stdout)
	}
	return nil
}

// firstQuestions keeps the first n questions (0: all) and the
// conversations they are about.
func firstQuestions(convs []qaConversation, n int) []qaConversation {
	if n == 0 {
		return convs
	}
	var out []qaConversation
	for _, c := range convs {
		if n == 0 {
			break
		}
		if len(c.questions) > n {
			c.questions = c.questions[:n]
		}
		n -= len(c.questions)
		out = append(out, c)
	}
	return out
}

// countMemories counts the memories of the conversations' users.
func countMemories(ctx context.Context, mc kiokuv1connect.MemoryBankServiceClient, convs []qaConversation) (int, error) {
	n := 0
	for _, c := range convs {
		var token string
		for {
			list, err := mc.ListMemories(ctx, connect.NewRequest(&kiokuv1.ListMemoriesRequest{Parent: "apps/qa", PageSize: 1000, PageToken: token,
				Scope: map[string]string{"user_id": c.user}}))
			if err != nil {
				return 0, err
			}
			n += len(list.Msg.GetMemories())
			if token = list.Msg.GetNextPageToken(); token == "" {
				break
			}
		}
	}
	return n, nil
}

// askQA retrieves for one question, has it answered and judged.
func askQA(ctx context.Context, sc kiokuv1connect.SessionServiceClient, mc kiokuv1connect.MemoryBankServiceClient, opts qaOptions, c *qaConversation, q qaQuestion) (qaResult, error) {
	res := qaResult{category: q.category}
	start := time.Now()
	items, err := recallQA(ctx, sc, mc, opts, c.user, q.question)
	if err != nil {
		return res, fmt.Errorf("retrieving for %q: %w", q.question, err)
	}
	res.retrieval = time.Since(start)
	prompt := qaAnswerPrompt(items, q)
	res.tokens = estimateTokens(qaAnswerSystem) + estimateTokens(prompt)
	answer := strings.Join(items, "\n")
	if opts.answerer != nil {
		call, err := generate(ctx, opts.answerer, qaAnswerSystem, prompt, false)
		if err != nil {
			return res, fmt.Errorf("answering %q: %w", q.question, err)
		}
		answer, res.answered = call.text, true
	}
	res.total = time.Since(start)
	if opts.judge != nil {
		res.verdict, err = judgeModel(ctx, opts.judge, q, answer)
		return res, err
	}
	res.verdict = judgeExact(q.answer, answer, opts.answerer == nil)
	return res, nil
}

// recallQA returns what kioku recalls for a question, one line an item,
// each with its date: memories (their event time, else their stated
// time), then events.
func recallQA(ctx context.Context, sc kiokuv1connect.SessionServiceClient, mc kiokuv1connect.MemoryBankServiceClient, opts qaOptions, user, question string) ([]string, error) {
	var items []string
	if opts.retrieve != "events" {
		res, err := mc.RetrieveMemories(ctx, connect.NewRequest(&kiokuv1.RetrieveMemoriesRequest{
			Parent: "apps/qa", Scope: map[string]string{"user_id": user},
			Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: question, TopK: int32(opts.topK)}},
		}))
		if err != nil {
			return nil, err
		}
		for _, r := range res.Msg.GetRetrievedMemories() {
			m := r.GetMemory()
			when := m.GetEventTime()
			if when == nil {
				when = m.GetStatedTime()
			}
			items = append(items, datedItem(when.AsTime(), when != nil, m.GetFact()))
		}
	}
	if opts.retrieve != "memories" {
		res, err := sc.SearchEvents(ctx, connect.NewRequest(&kiokuv1.SearchEventsRequest{Parent: "apps/qa/users/" + user, Query: question, PageSize: int32(opts.topK)}))
		if err != nil {
			return nil, err
		}
		for _, r := range res.Msg.GetResults() {
			e := r.GetEvent()
			var text []string
			for _, p := range e.GetContent().GetParts() {
				if p.GetText() != "" {
					text = append(text, p.GetText())
				}
			}
			items = append(items, datedItem(e.GetTimestamp().AsTime(), e.GetTimestamp() != nil, e.GetAuthor()+": "+strings.Join(text, " ")))
		}
	}
	return items, nil
}

// datedItem is a recalled item with its date in front, when it has one.
func datedItem(t time.Time, dated bool, text string) string {
	if !dated {
		return text
	}
	return "(" + t.Format("2 January 2006") + ") " + text
}

// qaReport sums the questions' outcomes into r.
func qaReport(r *benchReport, results []qaResult, opts qaOptions) {
	type tally struct {
		n, correct int
	}
	byCategory := map[string]*tally{}
	var total tally
	tokens, f1 := 0, 0.0
	var retrieval, latency, answer []time.Duration
	for _, r := range results {
		t := byCategory[r.category]
		if t == nil {
			t = &tally{}
			byCategory[r.category] = t
		}
		t.n++
		total.n++
		if r.verdict.correct {
			t.correct++
			total.correct++
		}
		tokens += r.tokens
		f1 += max(r.verdict.f1, 0)
		retrieval = append(retrieval, r.retrieval)
		latency = append(latency, r.total)
		if r.answered {
			answer = append(answer, r.total-r.retrieval)
		}
	}
	quantiles := func(lats []time.Duration) map[string]float64 {
		return map[string]float64{"p50": roundFigure(ms(percentile(lats, 0.50))), "p95": roundFigure(ms(percentile(lats, 0.95)))}
	}
	cats := map[string]any{}
	for name, t := range byCategory {
		cats[name] = map[string]any{"questions": t.n, "accuracy": roundFigure(float64(t.correct) / float64(t.n))}
	}
	r.set("questions", total.n)
	r.set("accuracy", float64(total.correct)/float64(total.n))
	r.set("by_category", cats)
	r.set("tokens_per_question", float64(tokens)/float64(total.n))
	r.set("latency_ms", quantiles(latency))
	r.set("retrieval_ms", quantiles(retrieval))
	if len(answer) > 0 {
		r.set("answer_ms", quantiles(answer))
	}
	if opts.answerer != nil {
		r.set("f1", f1/float64(total.n))
	}
}

// printQAReport prints the figures as a table.
func printQAReport(r *benchReport) {
	fmt.Fprintf(stdout, "accuracy   %.3f of %v questions\n", r.get("accuracy"), r.values["questions"])
	cats := r.values["by_category"].(map[string]any)
	names := make([]string, 0, len(cats))
	for name := range cats {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cats[name].(map[string]any)
		fmt.Fprintf(stdout, "  %-26s %.3f of %v\n", name, c["accuracy"], c["questions"])
	}
	lat := func(key string) string {
		q, ok := r.values[key].(map[string]float64)
		if !ok {
			return "-"
		}
		return fmt.Sprintf("p50 %.1f ms, p95 %.1f ms", q["p50"], q["p95"])
	}
	fmt.Fprintf(stdout, "tokens     %.0f per question (the answerer's prompt)\n", r.get("tokens_per_question"))
	fmt.Fprintf(stdout, "latency    %s; retrieval %s; answer %s\n", lat("latency_ms"), lat("retrieval_ms"), lat("answer_ms"))
	fmt.Fprintf(stdout, "model      %v calls (%v to generate memories)\n", r.values["model_calls"], r.values["extraction_calls"])
}
