package client_test

import (
	"context"
	"fmt"
	"log"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/exampletest"
	"github.com/kioku-ai/kioku/resource"
)

func Example() {
	url, stop := exampletest.StartKioku()
	defer stop()
	ctx := context.Background()
	c := client.New(url)

	s, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{
		Parent:    resource.UserName("demo", "ann"),
		SessionId: "s1",
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{
		Name: s.GetName(),
		Event: &kiokuv1.Event{
			Author:  "user",
			Content: client.Text("user", "I prefer tea."),
			Actions: &kiokuv1.EventActions{StateDelta: client.Delta(map[string]any{"user:drink": "tea"})},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended sequence", res.GetEvent().GetSequence())

	// The user: key is seen by every session of the user.
	other, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("demo", "ann")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("other session sees", other.GetState().AsMap()["user:drink"])
	// Output:
	// appended sequence 1
	// other session sees tea
}

func ExampleClient_AllEvents() {
	url, stop := exampletest.StartKioku()
	defer stop()
	ctx := context.Background()
	c := client.New(url, client.WithJSON())
	name := resource.SessionName("demo", "ann", "long")
	if _, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("demo", "ann"), SessionId: "long"}); err != nil {
		log.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: name, Event: &kiokuv1.Event{Id: fmt.Sprint("e", i), Author: "user"}}); err != nil {
			log.Fatal(err)
		}
	}
	// Pages of 2, fetched as the loop goes.
	for ev, err := range c.AllEvents(ctx, &kiokuv1.ListEventsRequest{Parent: name, PageSize: 2, OrderBy: "sequence desc"}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(ev.GetId(), " ")
	}
	fmt.Println()
	// Output: e4 e3 e2 e1 e0
}

func ExampleClient_WaitOperation() {
	url, stop := exampletest.StartKioku()
	defer stop()
	ctx := context.Background()
	c := client.New(url, client.WithGRPC())

	op, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{
		Parent: resource.AppName("demo"),
		Scope:  client.Scope("ann"),
		Source: client.Facts("Ann lives in Sapporo."),
	})
	if err != nil {
		log.Fatal(err)
	}
	done, err := c.WaitOperation(ctx, op.GetName())
	if err != nil {
		log.Fatal(err)
	}
	result, err := client.GenerateResult(done)
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range result.GetGeneratedMemories() {
		fmt.Println(g.GetAction(), g.GetMemory().GetFact())
	}
	// Output: MEMORY_ACTION_CREATED Ann lives in Sapporo.
}

func ExampleSimilar() {
	url, stop := exampletest.StartKioku()
	defer stop()
	ctx := context.Background()
	c := client.New(url)
	for _, fact := range []string{"Ann prefers green tea.", "Ann lives in Sapporo."} {
		if _, err := c.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: resource.AppName("demo"),
			Memory: &kiokuv1.Memory{Fact: fact, Scope: client.Scope("ann")}}); err != nil {
			log.Fatal(err)
		}
	}
	res, err := c.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: resource.AppName("demo"),
		Scope: client.Scope("ann"), Method: client.Similar("Which tea does Ann like?", 1)})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range res.GetRetrievedMemories() {
		fmt.Println(m.GetMemory().GetFact())
	}
	// Output: Ann prefers green tea.
}

// ExampleClient_Execute answers a model's call of Anthropic's memory tool
// (docs/clients.md shows its body): the tool_use block's input goes to
// Execute as it came, and the answer is the tool_result.
func ExampleClient_Execute() {
	url, stop := exampletest.StartKioku()
	defer stop()
	ctx := context.Background()
	c := client.New(url)
	user := resource.UserName("demo", "ann")

	// The input of a "memory" tool_use block of the model, as it came.
	input, err := structpb.NewStruct(map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "Ann likes tea.\n"})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Execute(ctx, &kiokuv1.ExecuteRequest{Parent: user, Input: input})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.GetIsError(), res.GetOutput()) // the tool_result's is_error and content

	for f, err := range c.AllMemoryFiles(ctx, &kiokuv1.ListMemoryFilesRequest{Parent: user}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(f.GetPath(), f.GetSizeBytes(), f.GetRevision())
	}
	// Output:
	// false File created successfully at: /memories/notes.md
	// /memories/notes.md 15 1
}

// Example_firstProgram is the first program of the README and of
// docs/clients.md (which the docs test holds to this function's body): a
// session with one event, its events read back, a fact remembered and
// found again.
func Example_firstProgram() {
	url, stop := exampletest.StartKioku()
	defer stop()
	ctx := context.Background()
	c := client.New(url) // options: client.WithGRPC(), client.WithAuthToken(key), client.WithRetry(...)

	// A session of user ann in app demo, then one event with a state change.
	s, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("demo", "ann")})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: s.GetName(), Event: &kiokuv1.Event{
		Author:  "user",
		Content: client.Text("user", "I prefer tea."),
		Actions: &kiokuv1.EventActions{StateDelta: client.Delta(map[string]any{"user:drink": "tea"})},
	}})
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range c.AllEvents(ctx, &kiokuv1.ListEventsRequest{Parent: s.GetName()}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.GetSequence(), ev.GetAuthor(), ev.GetContent().GetParts()[0].GetText())
	}

	// Remember a fact about ann (client.FromSession(s.GetName()) would extract facts from the
	// conversation instead, by the offline extractor or a model), wait for it, and find it again.
	op, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: resource.AppName("demo"),
		Scope: client.Scope("ann"), Source: client.Facts("Ann lives in Sapporo.")})
	if err != nil {
		log.Fatal(err)
	}
	done, err := c.WaitOperation(ctx, op.GetName())
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.GenerateResult(done); err != nil {
		log.Fatal(err)
	}
	found, err := c.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: resource.AppName("demo"),
		Scope: client.Scope("ann"), Method: client.Similar("Where does Ann live?", 3)})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range found.GetRetrievedMemories() {
		fmt.Printf("%.2f %s\n", m.GetDistance(), m.GetMemory().GetFact())
	}
	// Output:
	// 1 user I prefer tea.
	// 0.58 Ann lives in Sapporo.
}
