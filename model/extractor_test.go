package model_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/model"
)

// The memory bank's calls as it sends them (memorybank/prompts.go): the
// response schemas of its replies, and the conversation and the memories
// in its prompt format. The end-to-end tests (internal/node) run the real
// pipeline.
type extractionReply struct {
	Facts []struct {
		Fact   string `json:"fact"`
		Topic  string `json:"topic" jsonschema:"enum=USER_PERSONAL_INFO,enum=USER_PREFERENCES"`
		Events []int  `json:"events"`
		Date   string `json:"date,omitempty"`
	} `json:"facts"`
}

type consolidationReply struct {
	Actions []struct {
		Candidate int    `json:"candidate"`
		Action    string `json:"action"`
		Memory    int    `json:"memory"`
		Fact      string `json:"fact"`
	} `json:"actions"`
}

// offlineFacts returns the facts the offline extractor replies to req,
// joined by "|".
func offlineFacts(t *testing.T, req *model.GenerateRequest) string {
	t.Helper()
	var got extractionReply
	offlineReply(t, req, &got)
	var facts []string
	for _, f := range got.Facts {
		facts = append(facts, f.Fact)
	}
	return strings.Join(facts, "|")
}

// offlineActions returns the consolidation actions the offline extractor
// replies to req, as JSON.
func offlineActions(t *testing.T, req *model.GenerateRequest) string {
	t.Helper()
	var got consolidationReply
	offlineReply(t, req, &got)
	b, _ := json.Marshal(got.Actions)
	return string(b)
}

// offlineReply asks the offline extractor and decodes its reply into got.
func offlineReply(t *testing.T, req *model.GenerateRequest, got any) {
	t.Helper()
	resp, err := model.OfflineExtractor{}.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(resp.Text), got); err != nil {
		t.Fatalf("reply %q: %v", resp.Text, err)
	}
}

func TestOfflineExtractorExtracts(t *testing.T) {
	req := &model.GenerateRequest{
		System: "You maintain the long-term memory of an assistant about its user. ...",
		Messages: []model.Message{{Role: "user", Text: `The conversation:
[1] user: Hello! (2026-05-08 09:00)
[2] hana: Hi! Tell me about yourself. I love flowers. (2026-05-08 09:00)
[3] user: I have a dog called Pochi.
I moved to Kyoto last month. I love green tea. (2026-05-08 09:01)
[4] user: I'm going to Hokkaido next Saturday. (calls weather {"city":"Sapporo"}) (2026-05-08 09:02)
[5] Caroline: I live in Boston. (2026-05-08 09:03)
[6] Assistant: I live in the cloud.
`}},
		Schema: model.SchemaFor(&extractionReply{}),
	}
	var got extractionReply
	offlineReply(t, req, &got)
	type fact struct {
		fact, topic string
		event       int
		date        string
	}
	want := []fact{
		{"The user has a dog called Pochi.", "USER_PERSONAL_INFO", 3, ""},
		{"The user moved to Kyoto in April 2026 and lives there.", "USER_PERSONAL_INFO", 3, "2026-04"},
		{"The user loves green tea.", "USER_PREFERENCES", 3, ""},
		// KEY_CONVERSATION_DETAILS is not among the topics asked for.
		{"The user is going to Hokkaido on 9 May 2026.", "", 4, "2026-05-09"},
		{"Caroline lives in Boston.", "USER_PERSONAL_INFO", 5, ""},
	}
	if len(got.Facts) != len(want) {
		t.Fatalf("facts %+v, want %+v", got.Facts, want)
	}
	for i, w := range want {
		g := got.Facts[i]
		if g.Fact != w.fact || g.Topic != w.topic || len(g.Events) != 1 || g.Events[0] != w.event || g.Date != w.date {
			t.Errorf("fact %d: %+v, want %+v", i+1, g, w)
		}
	}
}

// TestOfflineExtractorListener: in a conversation between two people,
// what one says to the other ("your") is written with the other's name;
// to the agent, it is not kept.
func TestOfflineExtractorListener(t *testing.T) {
	req := &model.GenerateRequest{
		Messages: []model.Message{{Role: "user", Text: `The conversation:
[1] Nate: Have you watched any good movies lately? (2026-05-08 09:00)
[2] Joanna: I finally finished my first screenplay. I took your advice on the ending! (2026-05-08 09:01)
[3] user: I finally finished my first screenplay. I took your advice on the ending! (2026-05-08 09:02)
[4] model: Well done. (2026-05-08 09:03)
`}},
		Schema: model.SchemaFor(&extractionReply{}),
	}
	if got, want := offlineFacts(t, req), "Joanna finished their first screenplay. Joanna took Nate's advice on the ending.|The user finished their first screenplay."; got != want {
		t.Errorf("facts %q, want %q", got, want)
	}
}

// TestOfflineExtractorEpisodeGoesOn: a message that tells nothing of its
// own goes on with the episode of the speaker's message before, citing
// both; one more such message does not.
func TestOfflineExtractorEpisodeGoesOn(t *testing.T) {
	req := &model.GenerateRequest{
		Messages: []model.Message{{Role: "user", Text: `The conversation:
[1] Caroline: I went to a poetry reading last night. (2026-05-08 09:00)
[2] Melanie: Wow, what was it like? (2026-05-08 09:01)
[3] Caroline: It was a transgender poetry reading where people shared their stories. (2026-05-08 09:02)
[4] Melanie: That sounds so empowering! (2026-05-08 09:03)
[5] Caroline: The organisers were all volunteers from the centre. (2026-05-08 09:04)
`}},
		Schema: model.SchemaFor(&extractionReply{}),
	}
	var got extractionReply
	offlineReply(t, req, &got)
	if len(got.Facts) != 1 || got.Facts[0].Fact != "Caroline went to a poetry reading on 7 May 2026. It was a transgender poetry reading where people shared their stories." || fmt.Sprint(got.Facts[0].Events) != "[1 3]" {
		t.Errorf("facts %+v", got.Facts)
	}
}

func TestOfflineExtractorConsolidates(t *testing.T) {
	req := &model.GenerateRequest{
		Messages: []model.Message{{Role: "user", Text: `Existing memories:
[1] The user lives in Osaka.
[2] The user has a dog called Pochi.

New facts:
(1) The user moved to Kyoto in April 2026 and lives there.
(2) The user owns a dog named Pochi.
(3) The user plays the cello.
`}},
		Schema: model.SchemaFor(&consolidationReply{}),
	}
	b := offlineActions(t, req)
	want := `[{"candidate":1,"action":"UPDATE","memory":1,"fact":"The user moved from Osaka to Kyoto in April 2026 and lives there."},` +
		`{"candidate":2,"action":"SKIP","memory":2,"fact":""},{"candidate":3,"action":"CREATE","memory":0,"fact":"The user plays the cello."}]`
	if b != want {
		t.Errorf("actions %s\nwant    %s", b, want)
	}
}

// TestOfflineExtractorNamesTheUser: once the user says their name, the
// facts about them carry it (the one that states it keeps "The user", to
// tie the two), in extraction and in consolidation, where a stored name
// counts as well and the facts are compared with it.
func TestOfflineExtractorNamesTheUser(t *testing.T) {
	req := &model.GenerateRequest{
		Messages: []model.Message{{Role: "user", Text: `The conversation:
[1] user: I have a dog called Pochi. (2026-05-08 09:00)
[2] user: Oh, and I'm Ann. My sister lives in Kobe. (2026-05-08 09:01)
[3] Caroline: I live in Boston. (2026-05-08 09:03)
`}},
		Schema: model.SchemaFor(&extractionReply{}),
	}
	if got, want := offlineFacts(t, req), "Ann has a dog called Pochi.|The user is Ann.|Ann's sister lives in Kobe.|Caroline lives in Boston."; got != want {
		t.Errorf("facts %q, want %q", got, want)
	}

	req = &model.GenerateRequest{
		Messages: []model.Message{{Role: "user", Text: `Existing memories:
[1] The user's name is Ann.
[2] The user lives in Osaka.

New facts:
(1) The user moved to Kyoto in April 2026 and lives there.
(2) The user plays the cello.
`}},
		Schema: model.SchemaFor(&consolidationReply{}),
	}
	b := offlineActions(t, req)
	want := `[{"candidate":1,"action":"UPDATE","memory":2,"fact":"Ann moved from Osaka to Kyoto in April 2026 and lives there."},` +
		`{"candidate":2,"action":"CREATE","memory":0,"fact":"Ann plays the cello."}]`
	if b != want {
		t.Errorf("actions %s\nwant    %s", b, want)
	}
}

func TestOfflineExtractorRefusesOtherCalls(t *testing.T) {
	m := model.NewMeter()
	gen := m.Generator(model.OfflineExtractor{})
	if !model.IsOfflineExtractor(gen) || model.IsOfflineExtractor(m.Generator(&model.Gemini{})) {
		t.Fatal("IsOfflineExtractor does not see through the meter")
	}
	for _, req := range []*model.GenerateRequest{
		{System: "Summarise the conversation.", Messages: []model.Message{{Role: "user", Text: "[1] user: hi"}}},
		{Messages: []model.Message{{Role: "user", Text: "hi"}}, Schema: model.SchemaFor(&struct{ Mood string }{})},
	} {
		_, err := gen.Generate(t.Context(), req)
		if fault.KindOf(err) != fault.FailedPrecondition || !strings.Contains(err.Error(), "needs a language model") || !strings.Contains(err.Error(), "--model-provider gemini") {
			t.Errorf("%v: want FailedPrecondition saying a language model is needed", err)
		}
	}
	if got := gen.Name(); got != "offline:kioku-extractor-v4" {
		t.Errorf("name %q", got)
	}
}
