package main

import (
	"context"
	"strings"
	"sync"

	"connectrpc.com/connect"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
)

// The extracted-offline variant of bench locomo: the memories are what
// the offline extractor generates from the conversations, not the turns
// or the observations. Each LoCoMo session becomes a kioku session of the
// conversation's user (apps/locomo/users/<sample_id>/sessions/<sample_id>-s<N>),
// every turn an event authored by its speaker at the session's date (a
// second apart, in order), with the turn's dia_id as its id ("D1:3" as
// "D1.3"), and memories are generated from each session in turn, so that
// later sessions consolidate against what earlier ones left. A question's
// recall counts the evidence among the source events of the memories
// retrieved.

// locomoExtracted is what generation made of the conversations.
type locomoExtracted struct {
	memories, sessions, events int
	// covered is the share of the questions' evidence that some memory
	// cites: the most recall can reach.
	covered float64
	// byConv counts each conversation's memories and events.
	byConv map[string][2]int
}

// eventIDOf returns the event id of a dia_id, and diaIDOf the reverse.
func eventIDOf(dia string) string { return strings.ReplaceAll(dia, ":", ".") }
func diaIDOf(event string) string { return strings.ReplaceAll(event, ".", ":") }

// generateLocomo generates the memories of one conversation.
func generateLocomo(ctx context.Context, sc kiokuv1connect.SessionServiceClient, mc kiokuv1connect.MemoryBankServiceClient, oc kiokuv1connect.OperationServiceClient, c *locomoConversation) (sessions, events int, err error) {
	conv, err := locomoQAConversation(c)
	if err != nil {
		return 0, 0, err
	}
	return ingestQA(ctx, "locomo", sc, mc, oc, &conv)
}

// extractLocomo generates the memories of every conversation (in
// parallel; each conversation's sessions in order) and measures how much
// of the evidence they cite.
func extractLocomo(ctx context.Context, env *benchEnv, convs []locomoConversation) (*locomoExtracted, error) {
	sc := env.sessions()
	mc := env.memories()
	oc := env.operations()
	var mu sync.Mutex
	out := &locomoExtracted{byConv: map[string][2]int{}}
	if err := parallel(ctx, len(convs), len(convs), func(ctx context.Context, i int) error {
		s, e, err := generateLocomo(ctx, sc, mc, oc, &convs[i])
		mu.Lock()
		out.sessions, out.events = out.sessions+s, out.events+e
		out.byConv[convs[i].SampleID] = [2]int{0, e}
		mu.Unlock()
		return err
	}); err != nil {
		return nil, err
	}
	var cited, evidence int
	for _, c := range convs {
		ids := map[string]bool{}
		var token string
		for {
			list, err := mc.ListMemories(ctx, connect.NewRequest(&kiokuv1.ListMemoriesRequest{Parent: "apps/locomo", PageSize: 1000, PageToken: token,
				Scope: map[string]string{"user_id": c.SampleID}}))
			if err != nil {
				return nil, err
			}
			for _, m := range list.Msg.GetMemories() {
				out.memories++
				n := out.byConv[c.SampleID]
				n[0]++
				out.byConv[c.SampleID] = n
				for _, id := range memoryDiaIDs(m) {
					ids[id] = true
				}
			}
			if token = list.Msg.GetNextPageToken(); token == "" {
				break
			}
		}
		for _, q := range c.QA {
			if q.Category < 1 || q.Category > 4 {
				continue
			}
			for _, e := range q.evidence() {
				evidence++
				if ids[e] {
					cited++
				}
			}
		}
	}
	if evidence > 0 {
		out.covered = float64(cited) / float64(evidence)
	}
	return out, nil
}

// memoryDiaIDs returns the dia_ids of the events a memory was generated
// from.
func memoryDiaIDs(m *kiokuv1.Memory) []string {
	var out []string
	for _, s := range m.GetSources() {
		for _, e := range s.GetEventIds() {
			out = append(out, diaIDOf(e))
		}
	}
	return out
}
