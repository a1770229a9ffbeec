package memorybank

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The structured replies of the two model calls. Their JSON schemas are
// generated from these types (model.SchemaFor) and sent as the response
// schema; the jsonschema tags become the descriptions the model reads.

// extractionReply is the reply of the extraction call.
type extractionReply struct {
	Facts []extractedFact `json:"facts" jsonschema_description:"The facts worth remembering long term. An empty list when there is nothing worth remembering."`
	// Profile holds the profile fields, by schema id and field name; its
	// schema joins the reply's only when profiles apply
	// (profileRun.replySchema).
	Profile map[string]map[string]profileReply `json:"profile,omitempty" jsonschema:"-"`
}

type extractedFact struct {
	Fact   string `json:"fact" jsonschema_description:"One self-contained fact in one sentence, in the language of the conversation, about the user in the third person (for example: The user prefers green tea). Dates in it are absolute (on 2 May 2023, not last Tuesday)."`
	Topic  string `json:"topic" jsonschema_description:"The topic the fact belongs to."`
	Events []int  `json:"events" jsonschema_description:"The numbers of the events the fact comes from."`
	Date   string `json:"date,omitempty" jsonschema_description:"When what the fact tells happened or began, resolved against the events' timestamps: YYYY-MM-DD, or YYYY-MM or YYYY when only the month or year is known. Empty when the conversation does not say."`
}

// consolidationReply is the reply of the consolidation call.
type consolidationReply struct {
	Actions []consolidationAction `json:"actions" jsonschema_description:"What to do with each new fact. Every new fact needs at least one action."`
}

type consolidationAction struct {
	Candidate int    `json:"candidate" jsonschema_description:"The number of the new fact this action is about."`
	Action    string `json:"action" jsonschema:"enum=CREATE,enum=UPDATE,enum=DELETE,enum=SKIP" jsonschema_description:"CREATE stores the new fact as a new memory. UPDATE rewrites an existing memory to include the new information. DELETE removes an existing memory the new fact contradicts or makes obsolete. SKIP stores nothing because an existing memory already says the same."`
	Memory    int    `json:"memory" jsonschema_description:"For UPDATE and DELETE: the number of the existing memory. For SKIP: the number of the memory that already says it, or 0. For CREATE: 0."`
	Fact      string `json:"fact" jsonschema_description:"For CREATE and UPDATE: the complete fact to store, one sentence. Empty for DELETE and SKIP."`
}

// extractionSchema returns the extraction reply's schema with the topic
// restricted to the allowed labels.
func extractionSchema(topics []string) *jsonschema.Schema {
	s := model.SchemaFor(&extractionReply{})
	if facts, ok := s.Properties.Get("facts"); ok && facts.Items != nil {
		if topic, ok := facts.Items.Properties.Get("topic"); ok {
			topic.Enum = nil
			for _, t := range topics {
				topic.Enum = append(topic.Enum, t)
			}
		}
	}
	return s
}

var consolidationSchema = model.SchemaFor(&consolidationReply{})

// conversation is the input of extraction: events, numbered from 1 in the
// order shown, with the session each came from ("" for inline events).
type conversation struct {
	events   []*sessiontype.Event
	sessions []string
}

func (c *conversation) add(session string, events ...*sessiontype.Event) {
	for _, e := range events {
		c.events = append(c.events, e)
		c.sessions = append(c.sessions, session)
	}
}

// render writes the events as numbered lines. Events without text are
// shown as what they did (a tool call, a tool result) or skipped.
func renderEvents(b *strings.Builder, events []*sessiontype.Event, number func(i int) int) {
	for i, e := range events {
		line := eventLine(e)
		if line == "" {
			continue
		}
		fmt.Fprintf(b, "[%d] %s", number(i), line)
		if !e.Timestamp.IsZero() {
			fmt.Fprintf(b, " (%s)", e.Timestamp.UTC().Format("2006-01-02 15:04"))
		}
		b.WriteByte('\n')
	}
}

// WriteConversation writes events as the extraction call shows them to a
// model, numbered from 1 in order: "[n] author: text (YYYY-MM-DD hh:mm)",
// the lines the offline extractor reads (model.OfflineExtractor). Other
// calls that show a conversation to the model (internal/workflow's
// rewrite of core memory blocks) write it so.
func WriteConversation(b *strings.Builder, events []*sessiontype.Event) {
	renderEvents(b, events, func(i int) int { return i + 1 })
}

func eventLine(e *sessiontype.Event) string {
	author := e.Author
	if author == "" {
		author = "unknown"
	}
	var parts []string
	if e.Content != nil {
		if t := strings.TrimSpace(e.Content.Text()); t != "" {
			parts = append(parts, t)
		}
		for _, p := range e.Content.Parts {
			if p.FunctionCall != nil {
				args, _ := json.Marshal(p.FunctionCall.Args)
				parts = append(parts, fmt.Sprintf("(calls %s %s)", p.FunctionCall.Name, aip.Truncate(string(args), 300)))
			}
			if p.FunctionResponse != nil {
				resp, _ := json.Marshal(p.FunctionResponse.Response)
				parts = append(parts, fmt.Sprintf("(%s returned %s)", p.FunctionResponse.Name, aip.Truncate(string(resp), 300)))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return author + ": " + strings.Join(parts, " ")
}

const extractionInstructions = `You maintain the long-term memory of an assistant about its user.
Read the conversation and list the facts about the user that are worth
remembering in future conversations, following the topics below. Only
durable information counts: who the user is, what they like and dislike,
decisions, plans and what they asked you to remember. Leave out greetings,
small talk, what the assistant said unless the user confirmed it, and
anything only useful in this conversation. Each fact is one self-contained
sentence that makes sense without the conversation, names the user as "The
user" (or by name), keeps dates and numbers, and is written in the language
of the conversation. Each event shows when it was said; resolve relative
dates against it: "last Tuesday" said on 2023-05-08 (a Monday) is
2023-05-02, "yesterday" said on 2023-05-08 is 2023-05-07, "next month" is
June 2023. Write absolute dates in the fact and give the date the fact is
about (what happened, or when it began) as its date. Cite the numbers of
the events each fact comes from. When nothing is worth remembering, answer
with an empty list.`

// extractionPrompt builds the system instruction and the user message of
// the extraction call.
func extractionPrompt(cfg *appconfig.Config, topics []string, descriptions map[string]string, conv *conversation) (system, user string) {
	var b strings.Builder
	b.WriteString(extractionInstructions)
	b.WriteString("\n\nTopics:\n")
	for _, t := range topics {
		fmt.Fprintf(&b, "- %s: %s\n", t, descriptions[t])
	}
	for i, ex := range cfg.Examples {
		fmt.Fprintf(&b, "\nExample %d. Conversation:\n", i+1)
		renderEvents(&b, ex.Events, func(j int) int { return j + 1 })
		facts := ex.ExpectedFacts
		if facts == nil {
			facts = []string{}
		}
		reply, _ := json.Marshal(facts)
		fmt.Fprintf(&b, "Facts to remember: %s\n", reply)
	}
	system = b.String()

	var u strings.Builder
	u.WriteString("The conversation:\n")
	renderEvents(&u, conv.events, func(i int) int { return i + 1 })
	return system, u.String()
}

const consolidationInstructions = `You maintain the long-term memory of an assistant about its user. New
facts have been learned. Compare each new fact with the existing memories
and decide, for each new fact:
- CREATE: it is new information; store it (you may rephrase it).
- UPDATE: it adds to or refines an existing memory; rewrite that memory as
  one sentence that keeps what is still true and adds the new information.
- DELETE: it contradicts an existing memory or makes it obsolete; remove that
  memory (and CREATE the new fact if it should be kept).
- SKIP: an existing memory already says the same; store nothing (give that
  memory's number).
Refer to existing memories only by the numbers shown. Act on each existing
memory at most once. Every new fact needs at least one action.`

// consolidationPrompt builds the consolidation call's messages. Existing
// memories are shown as [1]..[m], new facts as (1)..(n).
func consolidationPrompt(existing []*memorytype.Memory, candidates []candidate) (system, user string) {
	var u strings.Builder
	u.WriteString("Existing memories:\n")
	if len(existing) == 0 {
		u.WriteString("(none)\n")
	}
	for i, m := range existing {
		fmt.Fprintf(&u, "[%d] %s\n", i+1, m.Fact)
	}
	u.WriteString("\nNew facts:\n")
	for i, c := range candidates {
		fmt.Fprintf(&u, "(%d) %s\n", i+1, c.fact)
	}
	return consolidationInstructions, u.String()
}

// candidate is a fact to consolidate: extracted, or given directly.
type candidate struct {
	fact    string
	topics  []string
	sources []memorytype.Source
	// event and stated are its times (see Memory): the date the model
	// gave, and the latest timestamp of the events it cited.
	event, stated time.Time
	// events are the numbers of the events an extracted fact cites.
	events []int
}

// parseFactDate parses an extracted fact's date: YYYY-MM-DD, YYYY-MM or
// YYYY (the start of the period, UTC), or RFC 3339. Anything else, or a
// year a store cannot keep, is no date.
func parseFactDate(s string) time.Time {
	s = strings.TrimSpace(s)
	for _, layout := range []string{"2006-01-02", "2006-01", "2006", time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil && t.Year() >= 1678 && t.Year() <= 2261 {
			return t.UTC()
		}
	}
	return time.Time{}
}

// statedAt returns the latest timestamp of the cited events (zero when
// none has one).
func statedAt(conv *conversation, numbers []int) time.Time {
	var t time.Time
	for _, n := range numbers {
		if n >= 1 && n <= len(conv.events) && conv.events[n-1].Timestamp.After(t) {
			t = conv.events[n-1].Timestamp
		}
	}
	return t
}

// sourcesOf maps cited event numbers (1-based, in the conversation) to
// sources, one per session, ignoring numbers out of range and inline events
// (which belong to no session).
func sourcesOf(conv *conversation, numbers []int) []memorytype.Source {
	bySession := map[string][]string{}
	for _, n := range numbers {
		if n < 1 || n > len(conv.events) {
			continue
		}
		s := conv.sessions[n-1]
		if s == "" {
			continue
		}
		id := conv.events[n-1].ID
		if !slices.Contains(bySession[s], id) {
			bySession[s] = append(bySession[s], id)
		}
	}
	var out []memorytype.Source
	for s, ids := range bySession {
		out = append(out, memorytype.Source{Session: s, EventIDs: ids})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Session < out[j].Session })
	return out
}
