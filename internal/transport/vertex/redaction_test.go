package vertex_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// TestPIIRedactionThroughVertex: Vertex AI's API has no place for
// pii_redaction (a memory bank's configuration lives on the reasoning
// engine, which kioku does not serve), so it is set with kioku.v1 on the
// app the engine stands for; then generations asked for through Google's
// Go client, from a Vertex session and from direct contents, send the
// model (the fake Gemini API, through the real genai client) none of the
// e-mail address, the phone numbers (one Japanese, in full-width digits)
// or the card numbers, in any part of the request bodies of the
// extractions and the consolidation; and the memories read back through
// the Vertex surface hold placeholders where the model wrote the data
// back.
func TestPIIRedactionThroughVertex(t *testing.T) {
	ctx := t.Context()
	fake := modeltest.NewGemini(t)
	k := startKioku(t, fake)
	app := engine[strings.LastIndex(engine, "/")+1:]
	cfg := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, k.url)
	if _, err := cfg.UpdateMemoryBankConfig(ctx, connect.NewRequest(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/" + app + "/memoryBankConfig", PiiRedaction: &kiokuv1.PiiRedaction{Enabled: true}},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"pii_redaction"}},
	})); err != nil {
		t.Fatal(err)
	}
	c := googleClient(t, aiplatform.NewMemoryBankClient, k.grpcOptions())
	sc := googleClient(t, aiplatform.NewSessionClient, k.grpcOptions())

	sess := createSession(t, sc, "pii", "ann")
	text := func(s string) *aiplatformpb.Content {
		return &aiplatformpb.Content{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: s}}}}
	}
	for i, s := range []string{
		"Write to ann.lee@example.org, or call me on 415-555-0142.",
		"カード番号は 5555 5555 5555 4444 です。電話は０９０－１２３４－５６７８まで。",
	} {
		if _, err := sc.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: sess.GetName(), Event: &aiplatformpb.SessionEvent{
			Author: "user", InvocationId: fmt.Sprint("i", i+1), Timestamp: timestamppb.New(time.Now()), Content: text(s),
		}}); err != nil {
			t.Fatal(err)
		}
	}
	// The model writes the data back; what is stored is redacted.
	fake.SetResponder(func(call modeltest.Call) modeltest.Reply {
		switch {
		case strings.Contains(call.System, "list the facts") && strings.Contains(call.Text(), "My other card"):
			return modeltest.Reply{Text: `{"facts":[{"fact":"Ann's card is 4012 8888 8888 1881.","topic":"USER_PERSONAL_INFO","events":[1]}]}`}
		case strings.Contains(call.System, "list the facts"):
			return modeltest.Reply{Text: `{"facts":[{"fact":"Ann's e-mail address is ann.lee@example.org; her mobile is 090-1234-5678.","topic":"USER_PERSONAL_INFO","events":[1]}]}`}
		case strings.Contains(call.System, "Compare each new fact"):
			return modeltest.Reply{Text: `{"actions":[{"candidate":1,"action":"CREATE","memory":0,"fact":"Ann's card is 4012-8888-8888-1881."}]}`}
		}
		return modeltest.Reply{Status: 400}
	})
	gop, err := c.GenerateMemories(ctx, &aiplatformpb.GenerateMemoriesRequest{
		Parent: engine,
		Source: &aiplatformpb.GenerateMemoriesRequest_VertexSessionSource_{VertexSessionSource: &aiplatformpb.GenerateMemoriesRequest_VertexSessionSource{Session: sess.GetName()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := gop.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := gen.GetGeneratedMemories(); len(got) != 1 || got[0].GetMemory().GetFact() != "Ann's e-mail address is [EMAIL]; her mobile is [PHONE]." {
		t.Fatalf("generated from the session: %v", gen)
	}
	extractions := len(fake.Calls())

	gop, err = c.GenerateMemories(ctx, &aiplatformpb.GenerateMemoriesRequest{
		Parent: engine, Scope: map[string]string{"user_id": "ann"},
		Source: &aiplatformpb.GenerateMemoriesRequest_DirectContentsSource_{DirectContentsSource: &aiplatformpb.GenerateMemoriesRequest_DirectContentsSource{
			Events: []*aiplatformpb.GenerateMemoriesRequest_DirectContentsSource_Event{{Content: text("My other card is 4012888888881881, and my office is +81 3-1234-5678.")}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gop.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	secrets := []string{"ann.lee@example.org", "555-0142", "5555 5555 5555 4444", "０９０－１２３４－５６７８", "090-1234-5678",
		"4012888888881881", "4012 8888", "4012-8888", "3-1234-5678"}
	calls := fake.Calls()
	if extractions != 1 || len(calls) != 3 {
		t.Fatalf("%d model calls (%d for the session), want an extraction, then an extraction and a consolidation", len(calls), extractions)
	}
	for i, call := range calls {
		body, err := json.Marshal(call.Raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if strings.Contains(string(body), s) {
				t.Errorf("model call %d sent %q:\n%s", i+1, s, body)
			}
		}
	}
	for _, want := range []string{"Write to [EMAIL], or call me on [PHONE].", "カード番号は [CARD] です。電話は[PHONE]まで。"} {
		if !strings.Contains(calls[0].Text(), want) {
			t.Errorf("the extraction call lacks %q:\n%s", want, calls[0].Text())
		}
	}
	if want := "My other card is [CARD], and my office is [PHONE]."; !strings.Contains(calls[1].Text(), want) {
		t.Errorf("the extraction of the direct contents lacks %q:\n%s", want, calls[1].Text())
	}
	for _, want := range []string{"[1] Ann's e-mail address is [EMAIL]; her mobile is [PHONE].", "(1) Ann's card is [CARD]."} {
		if !strings.Contains(calls[2].Text(), want) {
			t.Errorf("the consolidation call lacks %q:\n%s", want, calls[2].Text())
		}
	}
	got := facts(allMemories(t, c, &aiplatformpb.ListMemoriesRequest{Parent: engine}))
	if want := []string{"Ann's card is [CARD].", "Ann's e-mail address is [EMAIL]; her mobile is [PHONE]."}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("memories %q, want %q", got, want)
	}
}
