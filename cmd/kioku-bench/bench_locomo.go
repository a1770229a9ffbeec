package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/internal/cli"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
)

const benchLocomoUsage = `Usage: kioku-bench locomo [--data PATH] [--variant turns|observations|observations-with-time|extracted-offline] [--json]

LoCoMo retrieval (see ../shared/data/locomo/README.md). kioku runs
in-process on loopback with a fresh temporary store. For each conversation,
one scope {"user_id": <sample_id>} receives one memory per dialogue turn
("<speaker>: <text>" plus the image caption, when there is one), or per
observation, created with CreateMemory and tagged with its dia_id(s) in
metadata; observations-with-time also gives each observation the date of
its session as its stated_time. extracted-offline stores the
conversations as sessions (one per LoCoMo session, each turn an event of
its speaker at the session's date, the dia_id its id) and generates the
memories from them with the offline extractor, session after session;
a memory's dia_ids are then those of its source events. Every question
of categories 1-4 with valid evidence is asked with RetrieveMemories
(top_k 20); recall@k is the share of the question's evidence ids among
the dia_ids of the first k memories, averaged over questions, reported
for all of them and for the temporal questions (category 2) alone. The
embedder is the built-in one unless --embedder says otherwise (same
flags as kioku serve).

With --json the last line is
  {"variant":..., "questions":N, "recall":{"1":r,"5":r,"10":r,"20":r},
   "temporal_questions":N, "temporal_recall":{"1":r,...}}
and for extracted-offline also "memories":N, "sessions":N, "events":N
and "evidence_cited":r (the share of the evidence some memory cites);
last "by_conversation": {sample_id: {"questions":N, "recall_10":r}}, each
conversation's recall@10 (also printed a line each; for extracted-offline
with its "memories" and "events").

Flags:
`

// locomoConversation is the part of a LoCoMo sample the benchmark reads.
type locomoConversation struct {
	SampleID     string                                    `json:"sample_id"`
	Conversation map[string]json.RawMessage                `json:"conversation"`
	Observation  map[string]map[string][][]json.RawMessage `json:"observation"`
	QA           []locomoQA                                `json:"qa"`
}

// readLocomo reads the LoCoMo conversations of a JSON file.
func readLocomo(path string) ([]locomoConversation, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the LoCoMo data: %w (pass --data)", err)
	}
	var convs []locomoConversation
	if err := json.Unmarshal(raw, &convs); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return convs, nil
}

// locomoQA is one question with the dialogue ids of its evidence.
type locomoQA struct {
	Question string            `json:"question"`
	Answer   json.RawMessage   `json:"answer"`
	Evidence []json.RawMessage `json:"evidence"`
	Category int               `json:"category"`
}

// evidence returns the question's well-formed evidence ids ("D1:3"); the
// dataset holds a few malformed ones, which are left out.
func (q locomoQA) evidence() []string {
	var out []string
	for _, e := range q.Evidence {
		var s string
		if json.Unmarshal(e, &s) == nil && evidenceID.MatchString(s) {
			out = append(out, s)
		}
	}
	return out
}

// recallAt is the share of evidence among the ids the first k results
// hold; results[j] are the ids of result j.
func recallAt(k int, evidence []string, results [][]string) float64 {
	found := map[string]bool{}
	for _, ids := range results[:min(k, len(results))] {
		for _, id := range ids {
			found[id] = true
		}
	}
	hit := 0
	for _, e := range evidence {
		if found[e] {
			hit++
		}
	}
	return float64(hit) / float64(len(evidence))
}

// askLocomo asks, 8 at a time, the questions of c that recall is measured
// on (categories 1 to 4, with evidence): find searches for the question
// and returns the ids each result stands for, best first; score then gets
// the question, its evidence and those ids, one question at a time.
func askLocomo(ctx context.Context, c *locomoConversation, find func(context.Context, locomoQA) ([][]string, error), score func(q locomoQA, evidence []string, results [][]string)) error {
	var mu sync.Mutex
	if err := parallel(ctx, 8, len(c.QA), func(ctx context.Context, i int) error {
		q := c.QA[i]
		evidence := q.evidence()
		if q.Category < 1 || q.Category > 4 || len(evidence) == 0 {
			return nil
		}
		results, err := find(ctx, q)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		score(q, evidence, results)
		return nil
	}); err != nil {
		return fmt.Errorf("asking the questions of %s: %w", c.SampleID, err)
	}
	return nil
}

type locomoTurn struct {
	Speaker string `json:"speaker"`
	DiaID   string `json:"dia_id"`
	Text    string `json:"text"`
	Caption string `json:"blip_caption"`
}

// locomoDoc is one memory to create.
type locomoDoc struct {
	text   string
	ids    []string
	stated time.Time // zero: none
}

// sessionDate parses a session's date, "1:56 pm on 8 May, 2023" (UTC).
func sessionDate(c map[string]json.RawMessage, n int) (time.Time, error) {
	var s string
	if err := json.Unmarshal(c[fmt.Sprintf("session_%d_date_time", n)], &s); err != nil {
		return time.Time{}, fmt.Errorf("session_%d_date_time: %w", n, err)
	}
	t, err := time.Parse("3:04 pm on 2 January, 2006", s)
	if err != nil {
		return time.Time{}, fmt.Errorf("session_%d_date_time %q: %w", n, s, err)
	}
	return t, nil
}

var evidenceID = regexp.MustCompile(`^D\d+:\d+$`)

// sessionNumbers returns the numbers N of the conversation's session_N keys
// that hold turns, in order.
func sessionNumbers(c map[string]json.RawMessage) []int {
	var out []int
	for k := range c {
		if n, ok := strings.CutPrefix(k, "session_"); ok {
			if i, err := strconv.Atoi(n); err == nil {
				out = append(out, i)
			}
		}
	}
	sort.Ints(out)
	return out
}

func locomoDocs(c *locomoConversation, variant string) ([]locomoDoc, error) {
	var docs []locomoDoc
	switch variant {
	case "turns":
		for _, n := range sessionNumbers(c.Conversation) {
			var turns []locomoTurn
			if err := json.Unmarshal(c.Conversation[fmt.Sprint("session_", n)], &turns); err != nil {
				continue // a session key without turns
			}
			for _, t := range turns {
				text := t.Speaker + ": " + t.Text
				if t.Caption != "" {
					text += " " + t.Caption
				}
				docs = append(docs, locomoDoc{text: text, ids: []string{t.DiaID}})
			}
		}
	case "observations", "observations-with-time":
		var keys []int
		for k := range c.Observation {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(k, "session_"), "_observation"))
			keys = append(keys, n)
		}
		sort.Ints(keys)
		for _, n := range keys {
			var stated time.Time
			if variant == "observations-with-time" {
				var err error
				if stated, err = sessionDate(c.Conversation, n); err != nil {
					return nil, err
				}
			}
			bySpeaker := c.Observation[fmt.Sprintf("session_%d_observation", n)]
			speakers := make([]string, 0, len(bySpeaker))
			for s := range bySpeaker {
				speakers = append(speakers, s)
			}
			sort.Strings(speakers)
			for _, s := range speakers {
				for _, obs := range bySpeaker[s] {
					if len(obs) < 2 {
						continue
					}
					var fact string
					if err := json.Unmarshal(obs[0], &fact); err != nil {
						return nil, err
					}
					var ids []string
					var one string
					if json.Unmarshal(obs[1], &one) == nil {
						ids = []string{one}
					} else if err := json.Unmarshal(obs[1], &ids); err != nil {
						return nil, fmt.Errorf("observation %q: dia_id %s", fact, obs[1])
					}
					docs = append(docs, locomoDoc{text: fact, ids: ids, stated: stated})
				}
			}
		}
	default:
		return nil, fmt.Errorf("--variant %q: use turns, observations, observations-with-time or extracted-offline", variant)
	}
	return docs, nil
}

func benchLocomo(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench locomo", "KIOKU_", benchLocomoUsage)
	data := fs.String("data", "../shared/data/locomo/locomo-dev.json", "LoCoMo JSON file")
	variant := fs.String("variant", "turns", "turns, observations, observations-with-time or extracted-offline")
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	flags := cli.RegisterModelFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	convs, err := readLocomo(*data)
	if err != nil {
		return err
	}
	models, err := flags.Config()
	if err != nil {
		return err
	}
	extracted := *variant == "extracted-offline"
	if extracted {
		if models.Provider != "" && models.Provider != "offline" {
			return fmt.Errorf("--variant extracted-offline generates with the offline extractor; --model-provider %s does not go with it", models.Provider)
		}
		models.Provider = "offline"
	} else if _, err := locomoDocs(&locomoConversation{}, *variant); err != nil {
		return err
	}
	env, err := startBenchNode(ctx, "sqlite", "", func(c *node.Config) { c.Models = models })
	if err != nil {
		return err
	}
	defer env.close()
	mc := env.memories()
	fmt.Fprintf(stdout, "kioku-bench locomo: %s, variant %s, embedder %s\n", *data, *variant, env.node.Memories.EmbedderName())
	var gen *locomoExtracted
	if extracted {
		start := time.Now()
		if gen, err = extractLocomo(ctx, env, convs); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "generated  %d memories from %d events of %d sessions in %.1f s; %.3f of the evidence cited\n",
			gen.memories, gen.events, gen.sessions, time.Since(start).Seconds(), gen.covered)
	}
	// ids returns the dia_ids of a retrieved memory.
	ids := func(m *kiokuv1.Memory) []string {
		if extracted {
			return memoryDiaIDs(m)
		}
		return strings.Split(m.GetMetadata()["dia_ids"], ",")
	}

	ks := []int{1, 5, 10, 20}
	sums, temporalSums := map[int]float64{}, map[int]float64{}
	questions, temporal := 0, 0
	// Each conversation's recall@10, to see how far one conversation's
	// figure strays from the mean (a held-out conversation is another).
	byConv := map[string]any{}
	for _, c := range convs {
		convQuestions, convSum := 0, 0.0
		scope := map[string]string{"user_id": c.SampleID}
		var docs []locomoDoc
		if !extracted {
			if docs, err = locomoDocs(&c, *variant); err != nil {
				return err
			}
		}
		if err := parallel(ctx, 16, len(docs), func(ctx context.Context, i int) error {
			req := &kiokuv1.CreateMemoryRequest{
				Parent:   "apps/locomo",
				MemoryId: fmt.Sprintf("%s-%d", c.SampleID, i),
				Memory: &kiokuv1.Memory{
					Fact: docs[i].text, Scope: scope,
					Metadata: map[string]string{"dia_ids": strings.Join(docs[i].ids, ",")},
				},
			}
			if !docs[i].stated.IsZero() {
				req.Memory.StatedTime = timestamppb.New(docs[i].stated)
			}
			_, err := mc.CreateMemory(ctx, connect.NewRequest(req))
			return err
		}); err != nil {
			return fmt.Errorf("creating the memories of %s: %w", c.SampleID, err)
		}
		find := func(ctx context.Context, q locomoQA) ([][]string, error) {
			res, err := mc.RetrieveMemories(ctx, connect.NewRequest(&kiokuv1.RetrieveMemoriesRequest{
				Parent: "apps/locomo", Scope: scope,
				Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: q.Question, TopK: 20}},
			}))
			if err != nil {
				return nil, err
			}
			var results [][]string
			for _, m := range res.Msg.GetRetrievedMemories() {
				results = append(results, ids(m.GetMemory()))
			}
			return results, nil
		}
		if err := askLocomo(ctx, &c, find, func(q locomoQA, evidence []string, results [][]string) {
			questions++
			convQuestions++
			convSum += recallAt(10, evidence, results)
			if q.Category == 2 {
				temporal++
			}
			for _, k := range ks {
				r := recallAt(k, evidence, results)
				sums[k] += r
				if q.Category == 2 {
					temporalSums[k] += r
				}
			}
		}); err != nil {
			return err
		}
		if convQuestions > 0 {
			one := map[string]any{"questions": convQuestions, "recall_10": roundFigure(convSum / float64(convQuestions))}
			line := fmt.Sprintf("%-10s recall@10 %.3f of %d questions", c.SampleID, convSum/float64(convQuestions), convQuestions)
			if gen != nil {
				n := gen.byConv[c.SampleID]
				one["memories"], one["events"] = n[0], n[1]
				line += fmt.Sprintf(", %d memories of %d events", n[0], n[1])
			}
			byConv[c.SampleID] = one
			fmt.Fprintln(stdout, line)
		}
	}
	if questions == 0 {
		return fmt.Errorf("no question with valid evidence in %s", *data)
	}
	recall, temporalRecall := map[string]float64{}, map[string]float64{}
	for _, k := range ks {
		recall[strconv.Itoa(k)] = roundFigure(sums[k] / float64(questions))
		temporalRecall[strconv.Itoa(k)] = roundFigure(temporalSums[k] / float64(max(temporal, 1)))
		fmt.Fprintf(stdout, "recall@%-2d  %.3f   temporal (category 2) %.3f\n", k, sums[k]/float64(questions), temporalSums[k]/float64(max(temporal, 1)))
	}
	fmt.Fprintf(stdout, "questions  %d, temporal %d\n", questions, temporal)
	if *asJSON {
		r := &benchReport{}
		r.set("variant", *variant)
		r.set("questions", questions)
		r.set("recall", recall)
		r.set("temporal_questions", temporal)
		r.set("temporal_recall", temporalRecall)
		if gen != nil {
			r.set("memories", gen.memories)
			r.set("sessions", gen.sessions)
			r.set("events", gen.events)
			r.set("evidence_cited", roundFigure(gen.covered))
		}
		r.set("by_conversation", byConv)
		return r.printJSON(stdout)
	}
	return nil
}
