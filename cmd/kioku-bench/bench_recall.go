package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const benchRecallUsage = `Usage: kioku-bench recall [--data PATH] [--sizes N,N] [--queries N] [--json]

Event search (SearchEvents) on the LoCoMo development split (see
../shared/data/locomo/README.md), with kioku in-process on loopback and a
fresh temporary SQLite store (written without fsync, to load faster;
searches read it the same way).

Recall: each conversation becomes one user (its sample_id) whose sessions
are the conversation's sessions; each dialogue turn is one event (author
the speaker, the text and the image caption as content, timestamped at the
session's date). Every question of categories 1-4 with valid evidence is
asked with SearchEvents over the user's sessions (20 results);
recall@k is the share of the question's evidence turns among the first k
results, averaged over questions.

Latency: one more user is given the turns of every conversation over and
over, in sessions of 25 events, until it has each of --sizes events; at
each size --queries questions are searched one after another and the
latency of each call (over loopback RPC) gives p50 and p95.

With --json the last line is
  {"questions":N, "recall":{"1":r,"5":r,"10":r,"20":r},
   "search_10000_p50_ms":x, "search_10000_p95_ms":x, ...}

Flags:
`

// recallTurn is one LoCoMo turn as an event of a session.
type recallTurn struct {
	session string // session_N
	diaID   string
	speaker string
	text    string
	caption string
	at      time.Time
}

// recallSessions returns a conversation's turns, session by session.
func recallSessions(c *locomoConversation) [][]recallTurn {
	var out [][]recallTurn
	for _, n := range sessionNumbers(c.Conversation) {
		var turns []locomoTurn
		if err := json.Unmarshal(c.Conversation[fmt.Sprint("session_", n)], &turns); err != nil {
			continue // a session key without turns
		}
		var date string
		json.Unmarshal(c.Conversation[fmt.Sprintf("session_%d_date_time", n)], &date)
		start, err := time.Parse("3:04 pm on 2 January, 2006", date)
		if err != nil {
			start = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n)
		}
		var s []recallTurn
		for i, t := range turns {
			s = append(s, recallTurn{session: fmt.Sprint("session_", n), diaID: t.DiaID, speaker: t.Speaker, text: t.Text, caption: t.Caption, at: start.Add(time.Duration(i) * time.Minute)})
		}
		out = append(out, s)
	}
	return out
}

// event returns the turn as an event with the given id.
func (t recallTurn) event(id string) *kiokuv1.Event {
	return &kiokuv1.Event{Id: id, InvocationId: id, Author: t.speaker, Timestamp: timestamppb.New(t.at),
		Content: &kiokuv1.Content{Role: "user", Parts: turnParts(t.text, t.caption)}}
}

// eventID turns a dia_id ("D1:3") into an event id ("D1-3").
func eventID(diaID string) string { return strings.ReplaceAll(diaID, ":", "-") }

func benchRecall(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench recall", "KIOKU_", benchRecallUsage)
	data := fs.String("data", "../shared/data/locomo/locomo-dev.json", "LoCoMo JSON file")
	sizesFlag := fs.String("sizes", "10000,100000", "events of the latency user at which to measure, comma-separated")
	queries := fs.Int("queries", 500, "searches timed at each size")
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var sizes []int
	for _, f := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || len(sizes) > 0 && n <= sizes[len(sizes)-1] {
			return fmt.Errorf("--sizes %q: give increasing positive numbers of events, like 10000,100000", *sizesFlag)
		}
		sizes = append(sizes, n)
	}
	if *queries <= 0 {
		return fmt.Errorf("--queries must be positive")
	}
	convs, err := readLocomo(*data)
	if err != nil {
		return err
	}
	env, err := startBenchNode(ctx, "sqlite", "", func(c *node.Config) { c.BenchUnsynced = true })
	if err != nil {
		return err
	}
	defer env.close()
	sc := env.sessions()
	fmt.Fprintf(stdout, "kioku-bench recall: %s\n", *data)
	r := &benchReport{}

	// Recall.
	ks := []int{1, 5, 10, 20}
	sums := map[int]float64{}
	var questionTexts []string
	questions := 0
	for _, c := range convs {
		user := "apps/recall/users/" + c.SampleID
		sessions := recallSessions(&c)
		if err := parallel(ctx, 8, len(sessions), func(ctx context.Context, i int) error {
			return appendSession(ctx, sc, user, c.SampleID+"-"+sessions[i][0].session, sessions[i], eventID)
		}); err != nil {
			return fmt.Errorf("loading the sessions of %s: %w", c.SampleID, err)
		}
		find := func(ctx context.Context, q locomoQA) ([][]string, error) {
			res, err := sc.SearchEvents(ctx, connect.NewRequest(&kiokuv1.SearchEventsRequest{Parent: user, Query: q.Question, PageSize: 20}))
			if err != nil {
				return nil, fmt.Errorf("searching %q: %w", q.Question, err)
			}
			var results [][]string
			for _, r := range res.Msg.GetResults() {
				results = append(results, []string{r.GetEvent().GetId()})
			}
			return results, nil
		}
		if err := askLocomo(ctx, &c, find, func(q locomoQA, evidence []string, results [][]string) {
			for i, s := range evidence {
				evidence[i] = eventID(s)
			}
			questions++
			questionTexts = append(questionTexts, q.Question)
			for _, k := range ks {
				sums[k] += recallAt(k, evidence, results)
			}
		}); err != nil {
			return err
		}
	}
	if questions == 0 {
		return fmt.Errorf("no question with valid evidence in %s", *data)
	}
	recall := map[string]float64{}
	for _, k := range ks {
		recall[strconv.Itoa(k)] = roundFigure(sums[k] / float64(questions))
		fmt.Fprintf(stdout, "recall@%-2d  %.3f\n", k, sums[k]/float64(questions))
	}
	fmt.Fprintf(stdout, "questions  %d\n", questions)
	r.set("questions", questions)
	r.set("recall", recall)

	// Latency at growing sizes, for one user.
	var all []recallTurn
	for _, c := range convs {
		for _, s := range recallSessions(&c) {
			all = append(all, s...)
		}
	}
	const perSession = 25
	loaded := 0
	for _, size := range sizes {
		first, last := loaded/perSession, (size+perSession-1)/perSession
		if err := parallel(ctx, 16, last-first, func(ctx context.Context, i int) error {
			s := first + i
			var turns []recallTurn
			for j := s * perSession; j < min((s+1)*perSession, size); j++ {
				turns = append(turns, all[j%len(all)])
			}
			return appendSession(ctx, sc, "apps/recall/users/load", fmt.Sprint("s", s), turns, nil)
		}); err != nil {
			return fmt.Errorf("loading %d events: %w", size, err)
		}
		loaded = last * perSession
		i := 0
		lats, err := measureLatency(ctx, *queries, func(ctx context.Context) error {
			q := questionTexts[i%len(questionTexts)]
			i++
			_, err := sc.SearchEvents(ctx, connect.NewRequest(&kiokuv1.SearchEventsRequest{Parent: "apps/recall/users/load", Query: q, PageSize: 10}))
			return err
		})
		if err != nil {
			return fmt.Errorf("searching %d events: %w", size, err)
		}
		p50, p95 := ms(percentile(lats, 0.50)), ms(percentile(lats, 0.95))
		fmt.Fprintf(stdout, "search %7d events   p50 %7.2f ms   p95 %7.2f ms\n", size, p50, p95)
		r.set(fmt.Sprintf("search_%d_p50_ms", size), p50)
		r.set(fmt.Sprintf("search_%d_p95_ms", size), p95)
	}
	if *asJSON {
		return r.printJSON(stdout)
	}
	return nil
}

// appendSession creates a session of user and appends the turns to it in
// order. id names each event after its turn; nil lets the server choose.
func appendSession(ctx context.Context, sc kiokuv1connect.SessionServiceClient, user, session string, turns []recallTurn, id func(diaID string) string) error {
	if _, err := sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: user, SessionId: session})); err != nil {
		return err
	}
	name := user + "/sessions/" + session
	for _, t := range turns {
		eid := ""
		if id != nil {
			eid = id(t.diaID)
		}
		if _, err := sc.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: name, Event: t.event(eid)})); err != nil {
			return err
		}
	}
	return nil
}
