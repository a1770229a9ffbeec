package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
)

// The data of bench qa: LoCoMo's conversations and LongMemEval's
// questions, both read into one form, a conversation (the sessions of one
// user) with the questions asked about it. A LoCoMo sample is one
// conversation with many questions; a LongMemEval item is one question
// with a haystack of sessions of its own.

// qaConversation is the sessions of one user and the questions about them.
type qaConversation struct {
	user      string // the kioku user id, and the memories' scope
	sessions  []qaSession
	questions []qaQuestion
}

// qaSession is one session: its turns, each an event.
type qaSession struct {
	id    string
	date  time.Time
	turns []qaTurn
}

// qaTurn is one turn: an event with its id, author and role ("user", or
// "model" for an assistant's turn).
type qaTurn struct {
	id, author, role, text string
	// caption describes the photo the turn shared ("" for none): a second
	// text part of the event, "[shares a photo: <caption>]", as an app
	// that captions the images its users send would store it.
	caption string
}

// qaQuestion is one question, its gold answer and its category.
type qaQuestion struct {
	question, answer, category string
	// date is when the question is asked (zero: not given).
	date time.Time
}

// readQA reads the conversations of a LoCoMo or LongMemEval JSON file;
// format "auto" tells them apart by their first element's keys.
func readQA(path, format string) ([]qaConversation, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("reading the benchmark data: %w (pass --data)", err)
	}
	if format == "auto" {
		var first []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &first); err != nil {
			return nil, "", fmt.Errorf("decoding %s: %w (want a JSON array of LoCoMo samples or LongMemEval questions)", path, err)
		}
		format = "locomo"
		if len(first) > 0 && first[0]["question_id"] != nil {
			format = "longmemeval"
		}
	}
	var convs []qaConversation
	switch format {
	case "locomo":
		var samples []locomoConversation
		if err := json.Unmarshal(raw, &samples); err != nil {
			return nil, "", fmt.Errorf("decoding %s as LoCoMo: %w", path, err)
		}
		for i := range samples {
			c, err := locomoQAConversation(&samples[i])
			if err != nil {
				return nil, "", fmt.Errorf("%s: %w", samples[i].SampleID, err)
			}
			convs = append(convs, c)
		}
	case "longmemeval":
		if convs, err = longMemEvalConversations(raw); err != nil {
			return nil, "", fmt.Errorf("decoding %s as LongMemEval: %w", path, err)
		}
	default:
		return nil, "", fmt.Errorf("--format %q: use auto, locomo or longmemeval", format)
	}
	return convs, format, nil
}

// locomoCategories names LoCoMo's question categories.
var locomoCategories = map[int]string{1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

// locomoQAConversation returns a LoCoMo sample as a conversation: each
// session's turns, authored by their speakers at the session's date (a
// second apart, in order), the dia_id their id ("D1:3" as "D1.3"); and its
// questions of categories 1 to 4 (5, adversarial, has no answer to judge).
func locomoQAConversation(c *locomoConversation) (qaConversation, error) {
	out := qaConversation{user: c.SampleID}
	for _, n := range sessionNumbers(c.Conversation) {
		var turns []locomoTurn
		if json.Unmarshal(c.Conversation[fmt.Sprint("session_", n)], &turns) != nil || len(turns) == 0 {
			continue // a session key without turns
		}
		date, err := sessionDate(c.Conversation, n)
		if err != nil {
			return out, err
		}
		s := qaSession{id: fmt.Sprintf("%s-s%d", c.SampleID, n), date: date}
		for _, t := range turns {
			s.turns = append(s.turns, qaTurn{id: eventIDOf(t.DiaID), author: t.Speaker, role: "user", text: t.Text, caption: t.Caption})
		}
		out.sessions = append(out.sessions, s)
	}
	for _, q := range c.QA {
		category, ok := locomoCategories[q.Category]
		if !ok || len(bytes.TrimSpace(q.Answer)) == 0 {
			continue
		}
		out.questions = append(out.questions, qaQuestion{question: q.Question, answer: answerText(q.Answer), category: category})
	}
	return out, nil
}

// answerText returns a gold answer as text: LoCoMo's are strings, a few
// numbers.
func answerText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

// longMemEvalItem is one question of LongMemEval (its published format:
// longmemeval_s.json, longmemeval_m.json, longmemeval_oracle.json).
type longMemEvalItem struct {
	QuestionID         string          `json:"question_id"`
	QuestionType       string          `json:"question_type"`
	Question           string          `json:"question"`
	Answer             json.RawMessage `json:"answer"`
	QuestionDate       string          `json:"question_date"`
	HaystackDates      []string        `json:"haystack_dates"`
	HaystackSessionIDs []string        `json:"haystack_session_ids"`
	HaystackSessions   [][]struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"haystack_sessions"`
}

// longMemEvalDate parses LongMemEval's dates, "2023/05/20 (Sat) 02:21".
func longMemEvalDate(s string) (time.Time, error) {
	return time.Parse("2006/01/02 (Mon) 15:04", s)
}

// safeID keeps what a kioku id may hold of a dataset's id.
var safeID = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// longMemEvalConversations returns each LongMemEval item as a conversation
// of its own user (its question_id): its haystack sessions, the user's
// turns authored by "user" and the assistant's by "assistant" (role
// model), and its one question, of its question_type, asked at its
// question_date. An abstention question (question_id ending in _abs) is
// a category of its own, "abstention".
func longMemEvalConversations(raw []byte) ([]qaConversation, error) {
	var items []longMemEvalItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	var out []qaConversation
	for _, it := range items {
		if it.QuestionID == "" || it.Question == "" {
			return nil, fmt.Errorf("an item without question_id or question")
		}
		if len(it.HaystackDates) != len(it.HaystackSessions) {
			return nil, fmt.Errorf("%s: %d haystack_dates for %d haystack_sessions", it.QuestionID, len(it.HaystackDates), len(it.HaystackSessions))
		}
		user := safeID.ReplaceAllString(it.QuestionID, "_")
		c := qaConversation{user: user}
		for i, turns := range it.HaystackSessions {
			date, err := longMemEvalDate(it.HaystackDates[i])
			if err != nil {
				return nil, fmt.Errorf("%s: haystack_dates[%d]: %w", it.QuestionID, i, err)
			}
			s := qaSession{id: fmt.Sprintf("%s-s%d", user, i), date: date}
			for j, t := range turns {
				turn := qaTurn{id: fmt.Sprintf("s%d.%d", i, j), author: "user", role: "user", text: t.Content}
				if t.Role == "assistant" {
					turn.author, turn.role = "assistant", "model"
				}
				s.turns = append(s.turns, turn)
			}
			if len(s.turns) > 0 {
				c.sessions = append(c.sessions, s)
			}
		}
		q := qaQuestion{question: it.Question, answer: answerText(it.Answer), category: it.QuestionType}
		if strings.HasSuffix(it.QuestionID, "_abs") {
			q.category = "abstention"
		}
		if q.category == "" {
			q.category = "unknown"
		}
		if it.QuestionDate != "" {
			var err error
			if q.date, err = longMemEvalDate(it.QuestionDate); err != nil {
				return nil, fmt.Errorf("%s: question_date: %w", it.QuestionID, err)
			}
		}
		c.questions = append(c.questions, q)
		out = append(out, c)
	}
	return out, nil
}

// ingestQA stores a conversation in kioku, one session after another (in
// app apps/<app>, under users/<user>), and generates the memories of each
// session once its events are in, so that later sessions consolidate
// against what earlier ones left. It returns the sessions and events
// stored.
// turnParts returns the parts of a turn's event: its text, and the
// caption of the photo it shared, when it did.
func turnParts(text, caption string) []*kiokuv1.Part {
	parts := []*kiokuv1.Part{{Text: text}}
	if caption != "" {
		parts = append(parts, &kiokuv1.Part{Text: "[shares a photo: " + caption + "]"})
	}
	return parts
}

func ingestQA(ctx context.Context, app string, sc kiokuv1connect.SessionServiceClient, mc kiokuv1connect.MemoryBankServiceClient, oc kiokuv1connect.OperationServiceClient, c *qaConversation) (sessions, events int, err error) {
	for _, s := range c.sessions {
		sess, err := sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{
			Parent: "apps/" + app + "/users/" + c.user, SessionId: s.id,
		}))
		if err != nil {
			return 0, 0, err
		}
		for i, t := range s.turns {
			if _, err := sc.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: sess.Msg.GetName(), Event: &kiokuv1.Event{
				Id: t.id, Author: t.author, Timestamp: timestamppb.New(s.date.Add(time.Duration(i) * time.Second)),
				Content: &kiokuv1.Content{Role: t.role, Parts: turnParts(t.text, t.caption)},
			}})); err != nil {
				return 0, 0, fmt.Errorf("appending %s to %s: %w", t.id, s.id, err)
			}
			events++
		}
		sessions++
		op, err := mc.GenerateMemories(ctx, connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{
			Parent: "apps/" + app, Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: sess.Msg.GetName()}},
		}))
		if err != nil {
			return 0, 0, err
		}
		done, err := oc.WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: op.Msg.GetName(), Timeout: durationpb.New(5 * time.Minute)}))
		if err != nil {
			return 0, 0, err
		}
		if e := done.Msg.GetError(); e != nil {
			return 0, 0, fmt.Errorf("generating from %s: %s", sess.Msg.GetName(), e.GetMessage())
		}
	}
	return sessions, events, nil
}
