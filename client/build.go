package client

// Small constructors for the messages a program builds most: contents,
// state deltas, retrieval methods and generation sources, so that a first
// program needs neither structpb's error nor the names of oneof wrappers.

import (
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// Text returns a message of one text part: Text("user", "I prefer tea.").
// Roles are "user" and "model", as in Gemini.
func Text(role, text string) *kiokuv1.Content {
	return &kiokuv1.Content{Role: role, Parts: []*kiokuv1.Part{{Text: text}}}
}

// Delta returns a state delta for an event's actions or UpdateState: keys
// choose their scope by prefix ("user:", "app:", "temp:", none: the
// session), values replace whole, and nil deletes a key. Values are what
// JSON holds: nil, bool, numbers, string, []any and map[string]any (and
// slices and maps of those). Delta panics on other values, as a program
// error, like regexp.MustCompile; use structpb.NewStruct to get an error
// instead.
func Delta(kv map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(kv)
	if err != nil {
		panic(fmt.Sprintf("client.Delta: %v", err))
	}
	return s
}

// Scope returns the scope of a user's memories, {"user_id": user}, the
// scope kioku gives memories generated from a user's sessions.
func Scope(user string) map[string]string { return map[string]string{"user_id": user} }

// Similar returns RetrieveMemoriesRequest's method for the k memories most
// similar to query (k 0: 3):
//
//	c.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: resource.AppName("demo"),
//		Scope: client.Scope("ann"), Method: client.Similar("What does Ann drink?", 5)})
func Similar(query string, k int) *kiokuv1.RetrieveMemoriesRequest_SimilaritySearch {
	return &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: query, TopK: int32(k)}}
}

// Every returns RetrieveMemoriesRequest's method for every memory of the
// scope, pageSize at a time (0: 100), most recently updated first; give
// the response's next_page_token as pageToken for the next page.
func Every(pageSize int, pageToken string) *kiokuv1.RetrieveMemoriesRequest_SimpleRetrieval {
	return &kiokuv1.RetrieveMemoriesRequest_SimpleRetrieval{SimpleRetrieval: &kiokuv1.SimpleRetrieval{PageSize: int32(pageSize), PageToken: pageToken}}
}

// FromSession returns GenerateMemoriesRequest's source for the events of a
// stored session not processed by an earlier generation:
//
//	c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: resource.AppName("demo"),
//		Source: client.FromSession(resource.SessionName("demo", "ann", "s1"))})
func FromSession(session string) *kiokuv1.GenerateMemoriesRequest_SessionSource {
	return &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: session}}
}

// FromEvents returns GenerateMemoriesRequest's source for a conversation
// given inline, oldest event first.
func FromEvents(events ...*kiokuv1.Event) *kiokuv1.GenerateMemoriesRequest_EventsSource {
	return &kiokuv1.GenerateMemoriesRequest_EventsSource{EventsSource: &kiokuv1.EventsSource{Events: events}}
}

// Facts returns GenerateMemoriesRequest's source for facts to remember as
// they are (consolidated with what the scope already holds, without a
// model call for extraction).
func Facts(facts ...string) *kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource {
	ms := make([]*kiokuv1.DirectMemory, len(facts))
	for i, f := range facts {
		ms[i] = &kiokuv1.DirectMemory{Fact: f}
	}
	return &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: ms}}
}
