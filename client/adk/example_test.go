package adk_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model/gemini"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/loadmemorytool"
	"google.golang.org/adk/v2/tool/preloadmemorytool"
	"google.golang.org/genai"

	"github.com/kioku-ai/kioku/client"
	"github.com/kioku-ai/kioku/client/adk"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/exampletest"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/resource"
)

// Example runs an ADK agent with kioku as its session and memory service
// (the program of docs/clients.md, which the docs test holds to this
// function's body): one turn through ADK's runner, then the session's
// events as kioku stores them.
func Example() {
	url, stop := exampletest.StartKioku()
	defer stop()
	defer exampletest.StartGemini(modeltest.Reply{Text: "Good morning, Ann!"})()
	ctx := context.Background()
	llm, err := gemini.NewModel(ctx, "gemini-2.5-flash", &genai.ClientConfig{APIKey: os.Getenv("GEMINI_API_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	companion, err := llmagent.New(llmagent.Config{
		Name:        "companion",
		Model:       llm,
		Instruction: "You are Hana, a cheerful companion.",
		Tools:       []tool.Tool{preloadmemorytool.New(), loadmemorytool.New()},
	})
	if err != nil {
		log.Fatal(err)
	}

	c := client.New(url)
	sessions := adk.NewSessionService(c)
	r, err := runner.New(runner.Config{
		AppName:        "companion",
		Agent:          companion,
		SessionService: sessions,
		MemoryService:  adk.NewMemoryService(c), // adk.WithTopK(5), adk.WithWait(true)
	})
	if err != nil {
		log.Fatal(err)
	}
	s, err := sessions.Create(ctx, &session.CreateRequest{AppName: "companion", UserID: "ann"})
	if err != nil {
		log.Fatal(err)
	}
	message := genai.NewContentFromText("Good morning!", genai.RoleUser)
	for ev, err := range r.Run(ctx, "ann", s.Session.ID(), message, agent.RunConfig{}) {
		if err != nil {
			log.Fatal(err)
		}
		if ev.IsFinalResponse() {
			fmt.Println(ev.Author+":", ev.Content.Parts[0].Text)
		}
	}

	// The turn is in kioku: the user's message and the agent's reply.
	for ev, err := range c.AllEvents(ctx, &kiokuv1.ListEventsRequest{Parent: resource.SessionName("companion", "ann", s.Session.ID())}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.GetSequence(), ev.GetAuthor(), ev.GetContent().GetParts()[0].GetText())
	}
	// Output:
	// companion: Good morning, Ann!
	// 1 user Good morning!
	// 2 companion Good morning, Ann!
}
