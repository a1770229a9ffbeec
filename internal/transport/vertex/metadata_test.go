package vertex_test

import (
	"net/url"
	"slices"
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
)

// names returns the last segments of the names of a listing's memories
// (under key: "memories" or "retrievedMemories"), sorted.
func names(t *testing.T, out map[string]any, key string) []string {
	t.Helper()
	list := []string{}
	items, _ := out[key].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		if key == "retrievedMemories" {
			m, _ = m["memory"].(map[string]any)
		}
		name, _ := m["name"].(string)
		list = append(list, name[len(engine+"/memories/"):])
	}
	slices.Sort(list)
	return list
}

// TestMemoryMetadataRoundTrips: metadata of every type comes back with its
// type over REST (as the Vertex AI SDK writes it), over kioku.v1 (typed and
// as text) and after an update; a display name and description too, over
// gRPC.
func TestMemoryMetadataRoundTrips(t *testing.T) {
	k := startKioku(t, nil)
	v := k.url + "/v1beta1/" + engine
	md := map[string]any{
		"source": map[string]any{"stringValue": "chat"}, "score": map[string]any{"doubleValue": 2.0},
		"pinned": map[string]any{"boolValue": true}, "seen": map[string]any{"timestampValue": "2026-01-02T03:04:05.123456789Z"},
	}
	op := ok(t, "POST", v+"/memories?memoryId=tea", `{"fact": "Ann prefers green tea.", "scope": {"user_id": "ann"}, "displayName": "tea",
		"metadata": {"source": {"stringValue": "chat"}, "score": {"doubleValue": 2}, "pinned": {"boolValue": true}, "seen": {"timestampValue": "2026-01-02T03:04:05.123456789Z"}}}`)
	if diff := cmp.Diff(md, nodetest.Path(op, "response", "metadata")); diff != "" {
		t.Errorf("CreateMemory's metadata (-sent +answered):\n%s", diff)
	}
	got := ok(t, "GET", v+"/memories/tea", "")
	if diff := cmp.Diff(md, got["metadata"]); diff != "" || got["displayName"] != "tea" {
		t.Errorf("GetMemory: %v; metadata (-sent +read):\n%s", got, diff)
	}
	km, err := client.New(k.url).GetMemory(t.Context(), &kiokuv1.GetMemoryRequest{Name: "apps/" + engineID + "/memories/tea"})
	if err != nil {
		t.Fatal(err)
	}
	if tm := km.GetTypedMetadata(); tm["score"].GetDoubleValue() != 2 || !tm["pinned"].GetBoolValue() || tm["source"].GetStringValue() != "chat" ||
		!tm["seen"].GetTimestampValue().AsTime().Equal(time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)) || km.GetDisplayName() != "tea" {
		t.Errorf("kioku.v1 typed metadata: %v", km)
	}
	if diff := cmp.Diff(map[string]string{"source": "chat", "score": "2", "pinned": "true", "seen": "2026-01-02T03:04:05.123456789Z"}, km.GetMetadata()); diff != "" {
		t.Errorf("kioku.v1 metadata as text (-want +got):\n%s", diff)
	}
	// An update replaces the metadata; the rest stays.
	ok(t, "PATCH", v+"/memories/tea?updateMask=metadata", `{"metadata": {"score": {"doubleValue": 0.5}}}`)
	if got := ok(t, "GET", v+"/memories/tea", ""); !cmp.Equal(got["metadata"], map[string]any{"score": map[string]any{"doubleValue": 0.5}}) || got["displayName"] != "tea" {
		t.Errorf("after updateMask=metadata: %v", got)
	}

	// Google's Go client over gRPC: display name and description.
	c := googleClient(t, aiplatform.NewMemoryBankClient, k.grpcOptions())
	cop, err := c.CreateMemory(t.Context(), &aiplatformpb.CreateMemoryRequest{Parent: engine, MemoryId: "bike",
		Memory: &aiplatformpb.Memory{Fact: "Ann rides a bike.", Scope: map[string]string{"user_id": "ann"}, DisplayName: "bike", Description: "How Ann gets around."}})
	if err != nil {
		t.Fatal(err)
	}
	bike, err := cop.Wait(t.Context())
	if err != nil || bike.GetDisplayName() != "bike" || bike.GetDescription() != "How Ann gets around." {
		t.Fatalf("CreateMemory over gRPC = %v, %v", bike, err)
	}
	uop, err := c.UpdateMemory(t.Context(), &aiplatformpb.UpdateMemoryRequest{Memory: &aiplatformpb.Memory{Name: bike.GetName(), Description: "Ann cycles."}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}})
	if err != nil {
		t.Fatal(err)
	}
	if bike, err = uop.Wait(t.Context()); err != nil || bike.GetDescription() != "Ann cycles." || bike.GetDisplayName() != "bike" {
		t.Fatalf("UpdateMemory of the description = %v, %v", bike, err)
	}
}

// TestMemoryFilters: RetrieveMemories, ListMemories and purge select
// exactly the memories their filter (AIP-160 with OR, NOT and parentheses)
// and filter_groups (metadata, OR of ANDs) match.
func TestMemoryFilters(t *testing.T) {
	k := startKioku(t, nil)
	v := k.url + "/v1beta1/" + engine
	for id, body := range map[string]string{
		"tea":    `"fact": "Ann drinks green tea.", "metadata": {"source": {"stringValue": "chat"}, "score": {"doubleValue": 2}}, "topics": [{"managedMemoryTopic": "USER_PREFERENCES"}]`,
		"coffee": `"fact": "Ann drinks coffee at work.", "metadata": {"source": {"stringValue": "mail"}, "score": {"doubleValue": 7}}`,
		"juice":  `"fact": "Ann drinks orange juice.", "metadata": {"source": {"stringValue": "form"}, "score": {"doubleValue": 4}, "pinned": {"boolValue": true}}`,
		"water":  `"fact": "Ann drinks water.", "metadata": {"source": {"stringValue": "chat"}, "score": {"doubleValue": 9}}`,
		"milk":   `"fact": "Ann drinks milk.", "topics": [{"customMemoryTopicLabel": "DRINKS"}]`,
	} {
		ok(t, "POST", v+"/memories?memoryId="+id, `{"scope": {"user_id": "ann"}, `+body+`}`)
	}
	ok(t, "POST", v+"/memories?memoryId=bob", `{"fact": "Bob drinks tea.", "scope": {"user_id": "bob"}, "metadata": {"source": {"stringValue": "chat"}}}`)

	retrieve := func(body string) []string {
		t.Helper()
		return names(t, ok(t, "POST", v+"/memories:retrieve", `{"scope": {"user_id": "ann"}, `+body+`}`), "retrievedMemories")
	}
	for _, c := range []struct {
		what, body string
		want       []string
	}{
		{"a filter with OR", `"filter": "metadata.source = \"mail\" OR metadata.score >= 9"`, []string{"coffee", "water"}},
		{"OR, by similarity", `"filter": "metadata.source = \"mail\" OR metadata.score >= 9", "similaritySearchParams": {"searchQuery": "Ann drinks", "topK": 10}`, []string{"coffee", "water"}},
		{"NOT and parentheses", `"filter": "NOT (metadata.source = \"chat\" OR metadata:pinned)", "simpleRetrievalParams": {"pageSize": 10}`, []string{"coffee", "milk"}},
		{"topics as Vertex AI names them", `"filter": "topics.managed_memory_topic: USER_PREFERENCES OR topics.custom_memory_topic_label: \"DRINKS\"", "simpleRetrievalParams": {"pageSize": 10}`, []string{"milk", "tea"}},
		{"fact and times", `"filter": "fact = \"Ann drinks water.\" AND createTime > \"2000-01-01T00:00:00Z\""`, []string{"water"}},
		{"filter groups", `"filterGroups": [{"filters": [{"key": "source", "value": {"stringValue": "mail"}}]}, {"filters": [{"key": "score", "op": "GREATER_THAN", "value": {"doubleValue": 3}}, {"key": "pinned", "value": {"boolValue": true}, "negate": true}]}], "simpleRetrievalParams": {"pageSize": 10}`, []string{"coffee", "water"}},
		{"filter and filter groups", `"filter": "metadata.source = \"chat\"", "filterGroups": [{"filters": [{"key": "score", "op": "LESS_THAN", "value": {"doubleValue": 5}}]}], "simpleRetrievalParams": {"pageSize": 10}`, []string{"tea"}},
	} {
		if got := retrieve(c.body); !slices.Equal(got, c.want) {
			t.Errorf("RetrieveMemories with %s: %v, want %v", c.what, got, c.want)
		}
	}

	// ListMemories: the scope, and a filter on the rest.
	list := ok(t, "GET", v+"/memories?"+url.Values{"filter": {`scope.user_id="ann" AND (metadata.source="chat" OR topics:"DRINKS")`}}.Encode(), "")
	if got := names(t, list, "memories"); !slices.Equal(got, []string{"milk", "tea", "water"}) {
		t.Errorf("ListMemories with a scope and OR: %v", got)
	}
	list = ok(t, "GET", v+"/memories?"+url.Values{"filter": {`metadata.source="chat"`}}.Encode(), "")
	if got := names(t, list, "memories"); !slices.Equal(got, []string{"bob", "tea", "water"}) {
		t.Errorf("ListMemories of every scope with a metadata filter: %v", got)
	}

	// Purge: counted, then deleted, exactly what the filter and groups
	// select.
	purge := `{"filter": "scope.user_id=\"ann\" AND metadata:score", "filterGroups": [{"filters": [{"key": "score", "op": "GREATER_THAN", "value": {"doubleValue": 5}}]}]`
	op := poll(t, v[:len(v)-len(engine)]+nodetest.Path(ok(t, "POST", v+"/memories:purge", purge+`}`), "name").(string))
	if nodetest.Path(op, "response", "purgeCount") != "2" {
		t.Errorf("purge without force: %v", op)
	}
	poll(t, v[:len(v)-len(engine)]+nodetest.Path(ok(t, "POST", v+"/memories:purge", purge+`, "force": true}`), "name").(string))
	left := ok(t, "GET", v+"/memories?"+url.Values{"filter": {`scope.user_id="ann"`}}.Encode(), "")
	if got := names(t, left, "memories"); !slices.Equal(got, []string{"juice", "milk", "tea"}) {
		t.Errorf("after the purge: %v", got)
	}
}

// TestGenerateAppliesMetadata: GenerateMemories gives its metadata to the
// memories it creates and applies it to those it updates as
// metadataMergeStrategy says; ingestEvents takes it too.
func TestGenerateAppliesMetadata(t *testing.T) {
	k := startKioku(t, nil)
	v := k.url + "/v1beta1/" + engine
	base := v[:len(v)-len(engine)]
	generate := func(metadata, strategy string) map[string]any {
		t.Helper()
		body := `{"directMemoriesSource": {"directMemories": [{"fact": "Ann owns a red bike."}]}, "scope": {"user_id": "ann"}, "metadata": ` + metadata
		if strategy != "" {
			body += `, "metadataMergeStrategy": "` + strategy + `"`
		}
		op := poll(t, base+nodetest.Path(ok(t, "POST", v+"/memories:generate", body+`}`), "name").(string))
		return nodetest.Path(op, "response", "generatedMemories", 0).(map[string]any)
	}
	md := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	str := func(s string) any { return map[string]any{"stringValue": s} }
	num := func(n float64) any { return map[string]any{"doubleValue": n} }

	first := generate(`{"source": {"stringValue": "chat"}, "n": {"doubleValue": 1}}`, "")
	name := nodetest.Path(first, "memory", "name")
	if first["action"] != "CREATED" || !cmp.Equal(nodetest.Path(first, "memory", "metadata"), md("source", str("chat"), "n", num(1))) {
		t.Fatalf("the first generation: %v", first)
	}
	for _, c := range []struct {
		metadata, strategy string
		want               map[string]any
	}{
		{`{"n": {"doubleValue": 2}, "extra": {"boolValue": true}}`, "MERGE", md("source", str("chat"), "n", num(2), "extra", map[string]any{"boolValue": true})},
		{`{"only": {"stringValue": "x"}}`, "", md("only", str("x"))},
		{`{"only": {"stringValue": "y"}}`, "OVERWRITE", md("only", str("y"))},
	} {
		g := generate(c.metadata, c.strategy)
		if nodetest.Path(g, "memory", "name") != name || g["action"] != "UPDATED" {
			t.Fatalf("generation with %s %s did not update the memory: %v", c.metadata, c.strategy, g)
		}
		if diff := cmp.Diff(c.want, ok(t, "GET", base+name.(string), "")["metadata"]); diff != "" {
			t.Errorf("after a generation with %s %s (-want +got):\n%s", c.metadata, c.strategy, diff)
		}
	}
	// REQUIRE_EXACT_MATCH: the memory's metadata differs, so it is not
	// consolidated with: a new memory holds the fact.
	g := generate(`{"only": {"stringValue": "z"}}`, "REQUIRE_EXACT_MATCH")
	if nodetest.Path(g, "memory", "name") == name || g["action"] != "CREATED" {
		t.Fatalf("REQUIRE_EXACT_MATCH with other metadata: %v", g)
	}
	// ... and with the same metadata it is.
	again := generate(`{"only": {"stringValue": "z"}}`, "REQUIRE_EXACT_MATCH")
	if nodetest.Path(again, "memory", "name") != nodetest.Path(g, "memory", "name") {
		t.Fatalf("REQUIRE_EXACT_MATCH with the same metadata: %v, want %v", again, nodetest.Path(g, "memory", "name"))
	}
	if got := ok(t, "GET", base+name.(string), "")["metadata"]; !cmp.Equal(got, md("only", str("y"))) {
		t.Errorf("the memory REQUIRE_EXACT_MATCH left alone: %v", got)
	}

	// ingestEvents takes metadata too (kioku generates at once); without
	// a generation model the fact cannot be extracted, so this checks
	// what the request says: a bad strategy is refused, naming it.
	status, out := call(t, "POST", v+"/memories:ingestEvents", `{"scope": {"user_id": "ann"}, "metadataMergeStrategy": "APPEND",
		"directContentsSource": {"events": [{"content": {"role": "user", "parts": [{"text": "I ride to work."}]}}]}}`)
	googleError(t, "ingestEvents with a bad strategy", status, out, 400, "INVALID_ARGUMENT")
	if nodetest.Path(out, "error", "details", 0, "fieldViolations", 0, "field") != "metadata_merge_strategy" {
		t.Errorf("ingestEvents with a bad strategy: %v", out)
	}
}
