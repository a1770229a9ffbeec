package vertex_test

import (
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"
	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"

	"github.com/kioku-ai/kioku/internal/app"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
)

// TestOperationOfAnotherKind: an operation of the app that is not the
// memory bank's (a session's compaction) reads through Vertex AI's
// Operations API by its name, done, with an empty response.
func TestOperationOfAnotherKind(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.SetResponder(func(modeltest.Call) modeltest.Reply { return modeltest.Reply{Text: "A summary."} })
	k := startKioku(t, fake)
	ctx := t.Context()
	key := sessions.Key{App: "1491331942182813696", User: "ann", ID: "s"}
	if _, err := k.node.Sessions.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := k.node.Sessions.AppendEvent(ctx, key, &sessions.Event{Author: "user", Content: &sessions.Content{Parts: []sessions.Part{{Text: "hi"}}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	op, err := k.node.App.CompactSession(ctx, app.CompactRequest{Session: key, UpTo: 2})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := k.node.App.WaitOperation(ctx, key.App, op.ID, 10*time.Second); err != nil || done.State != jobs.Succeeded {
		t.Fatalf("the compaction: %+v, %v", done, err)
	}
	c, err := aiplatform.NewMemoryBankClient(ctx, k.grpcOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: engine + "/operations/" + op.ID})
	if err != nil || !got.GetDone() || got.GetError() != nil {
		t.Fatalf("GetOperation = %v, %v; want it done without error", got, err)
	}
	var resp aiplatformpb.GenerateMemoriesResponse
	if err := got.GetResponse().UnmarshalTo(&resp); err != nil || len(resp.GetGeneratedMemories()) != 0 {
		t.Fatalf("response = %v, %v; want no memories", &resp, err)
	}
}
