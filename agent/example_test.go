package agent_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"google.golang.org/genai"

	"github.com/kioku-ai/kioku/agent"
	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/exampletest"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/resource"
)

// finalAnswer is the model's reply that gives the structured reply: a call
// of the agent's final_answer tool with the reply's fields.
func finalAnswer(dialogue, emotion string) modeltest.Reply {
	return modeltest.Reply{Parts: []map[string]any{{"functionCall": map[string]any{
		"name": "final_answer", "args": map[string]any{"dialogue": dialogue, "emotion": emotion}}}}}
}

// Reply is the structured reply of Example: the model's answer is decoded
// into it, and its JSON schema, made from the type, is what the model is
// asked for.
type Reply struct {
	Dialogue string `json:"dialogue"`
	Emotion  string `json:"emotion" jsonschema:"enum=happy,enum=sad,enum=neutral"`
}

// Example runs one turn of a companion with memory and a structured reply
// (the program of docs/clients.md, which the docs test holds to this
// function's body).
func Example() {
	url, stop := exampletest.StartKioku()
	defer stop()
	defer exampletest.StartGemini(finalAnswer("Good morning to you!", "happy"))()
	ctx := context.Background()
	genaiClient, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: os.Getenv("GEMINI_API_KEY"), Backend: genai.BackendGeminiAPI})
	if err != nil {
		log.Fatal(err)
	}
	kioku := client.New(url)
	a := &agent.Agent{
		Kioku:       kioku,
		Model:       &model.Gemini{Client: genaiClient, Model: "gemini-2.5-flash"}, // or model.NewOpenAI(cfg, "llama3.1")
		Instruction: "You are Hana, a cheerful companion. The user likes to be called {user:nickname?}.",
		Output:      Reply{},                                      // the reply's JSON schema comes from this type
		Memory:      agent.MemoryPolicy{Mode: agent.MemoryOnSave}, // or MemoryEveryTurn, MemoryEveryNTurns, MemoryNever
		UserIDKey:   "user_id",                                    // the memory tools act for the user named in the session's state
	}

	// The conversation's session, with the user id in its state.
	s, err := kioku.CreateSession(ctx, &kiokuv1.CreateSessionRequest{
		Parent:  resource.UserName("companion", "ann"),
		Session: &kiokuv1.Session{State: client.Delta(map[string]any{"user_id": "ann"})},
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := a.Turn(ctx, s.GetName(), "Good morning!")
	if err != nil {
		log.Fatal(err)
	}
	reply := res.Output.(*Reply)
	fmt.Printf("Hana (%s): %s\n", reply.Emotion, reply.Dialogue)
	// Output: Hana (happy): Good morning to you!
}
