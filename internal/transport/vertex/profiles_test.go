package vertex_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// TestRetrieveProfilesAsTheSDK: with a profile schema in the memory bank
// configuration, a generation from a Vertex session whose user states a
// preference fills the profile field (the offline model), a later
// contradiction updates it with a revision, and memories:retrieveProfiles
// answers 200 in Vertex AI's shape ({profiles: {schemaId: {schemaId,
// profile}}}); a user's key reaches its own profiles only.
func TestRetrieveProfilesAsTheSDK(t *testing.T) {
	appKey, appEntry := auth.NewKey("backend", engineID, "")
	annKey, annEntry := auth.NewKey("ann", engineID, "ann")
	k := startKiokuWith(t, func(cfg *node.Config) { cfg.Keys = nodetest.Keys(t, appEntry, annEntry) })
	v := k.url + "/v1beta1/"
	as := func(key string) func(method, url, body string) (int, map[string]any) {
		return func(method, url, body string) (int, map[string]any) {
			t.Helper()
			return call(t, method, url, body, "x-goog-api-key", key)
		}
	}
	app, ann := as(appKey), as(annKey)
	must := func(status int, out map[string]any) map[string]any {
		t.Helper()
		if status != 200 {
			t.Fatalf("%d %v", status, out)
		}
		return out
	}
	must(app("PATCH", k.url+"/v1/apps/"+engineID+"/memoryBankConfig?updateMask=profileSchemas", `{"profileSchemas": [{"schemaId": "user-profile",
		"jsonSchema": {"type": "OBJECT", "properties": {"preferred_language": {"type": "STRING"}, "tone_preference": {"type": "STRING", "enum": ["succinct", "detailed"]}}}}]}`))

	generate := func(said string) {
		t.Helper()
		op := must(ann("POST", v+engine+"/sessions", `{"userId": "ann"}`))
		name := nodetest.Path(op, "response", "name").(string)
		must(ann("POST", v+name+":appendEvent", `{"author": "user", "invocationId": "i1", "timestamp": "2026-01-01T00:00:00Z",
			"content": {"role": "user", "parts": [{"text": "`+said+`"}]}}`))
		op = must(ann("POST", v+engine+"/memories:generate", `{"vertexSessionSource": {"session": "`+name+`"}, "scope": {"user_id": "ann"}}`))
		for op["done"] != true {
			op = must(ann("GET", v+op["name"].(string), ""))
		}
		if op["error"] != nil {
			t.Fatalf("generation: %v", op)
		}
	}
	generate("My preferred language is Python. I prefer succinct answers.")
	want := map[string]any{"profiles": map[string]any{"user-profile": map[string]any{"schemaId": "user-profile",
		"profile": map[string]any{"preferred_language": "Python", "tone_preference": "succinct"}}}}
	if got := must(ann("POST", v+engine+"/memories:retrieveProfiles", `{"scope": {"user_id": "ann"}}`)); !cmp.Equal(got, want) {
		t.Fatalf("retrieveProfiles (-want +got):\n%s", cmp.Diff(want, got))
	}

	generate("Well, my preferred language is Go.")
	want = map[string]any{"profiles": map[string]any{"user-profile": map[string]any{"schemaId": "user-profile",
		"profile": map[string]any{"preferred_language": "Go", "tone_preference": "succinct"}}}}
	if got := must(ann("POST", v+"reasoningEngines/"+engineID+"/memories:retrieveProfiles", `{"scope": {"user_id": "ann"}}`)); !cmp.Equal(got, want) {
		t.Fatalf("retrieveProfiles after the contradiction (-want +got):\n%s", cmp.Diff(want, got))
	}
	// The field's memory has the revision of the change.
	list := must(app("GET", k.url+"/v1/apps/"+engineID+"/memories?memoryTypes=MEMORY_TYPE_STRUCTURED_PROFILE", ""))
	var field string
	for _, m := range list["memories"].([]any) {
		if nodetest.Path(m, "profile", "field") == "preferred_language" {
			field = nodetest.Path(m, "name").(string)
		}
	}
	if field == "" {
		t.Fatalf("no memory holds preferred_language: %v", list)
	}
	revs := must(ann("GET", v+engine+"/memories/"+field[len("apps/"+engineID+"/memories/"):]+"/revisions", ""))
	if nodetest.Path(revs, "memoryRevisions", 0, "fact") != "preferred_language: Go" || nodetest.Path(revs, "memoryRevisions", 1, "fact") != "preferred_language: Python" {
		t.Fatalf("the field's revisions: %v", revs)
	}

	status, out := ann("POST", v+engine+"/memories:retrieveProfiles", `{"scope": {"user_id": "bob"}}`)
	googleError(t, "ann's key reading bob's profiles", status, out, 403, "PERMISSION_DENIED")
	status, out = app("POST", v+engine+"/memories:retrieveProfiles", `{}`)
	googleError(t, "no scope", status, out, 400, "INVALID_ARGUMENT")
}
