package transport_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/resource"
)

// TestProfilesOverREST drives structured profiles through kioku.v1's REST
// mapping with the offline model: the app's key declares a schema (a bad
// one is refused naming the field), a generation from ann's session fills
// the field, a later contradiction updates it with a revision,
// RetrieveProfiles and typed listings return it, and bob's key reaches
// nothing of it.
func TestProfilesOverREST(t *testing.T) {
	url, annKey, bobKey, appKey := memoryFileServer(t)
	base := url + "/v1/apps/a"
	status, out := restCall(t, http.MethodPatch, base+"/memoryBankConfig?updateMask=profileSchemas", `{"profileSchemas": [{"schemaId": "user-profile", "scopeKeys": ["user_id"],
		"jsonSchema": {"type": "OBJECT", "properties": {"preferred_language": {"type": "STRING", "description": "The programming language the user prefers."},
		"tone": {"type": "string", "enum": ["succinct", "detailed"]}}}}]}`, appKey)
	if status != http.StatusOK || nodetest.Path(out, "profileSchemas", 0, "jsonSchema", "properties", "tone", "enum", 1) != "detailed" ||
		nodetest.Path(out, "profileSchemas", 0, "jsonSchema", "properties", "preferred_language", "type") != "string" {
		t.Fatalf("declaring a profile schema: %d %v", status, out)
	}
	status, out = restCall(t, http.MethodPatch, base+"/memoryBankConfig?updateMask=profileSchemas", `{"profileSchemas": [{"schemaId": "bad",
		"jsonSchema": {"type": "object", "properties": {"tags": {"type": "array"}}}}]}`, appKey)
	if msg, _ := nodetest.Path(out, "message").(string); status != http.StatusBadRequest || !strings.Contains(msg, "memory_bank_config.profile_schemas[0].json_schema.properties.tags.type") {
		t.Fatalf("a list field: %d %v", status, out)
	}
	if status, out = restCall(t, http.MethodPatch, base+"/memoryBankConfig?updateMask=profileSchemas", `{"profileSchemas": []}`, annKey); status != http.StatusForbidden {
		t.Fatalf("ann's key changing the app's schemas: %d %v", status, out)
	}

	// Two sessions of ann: a preference, then its contradiction.
	ann := client.New(url, client.WithAuthToken(annKey), client.WithHTTPClient(h2cClient()))
	ctx := t.Context()
	for i, said := range []string{"My preferred language is Python.", "Well, my preferred language is Go."} {
		s, err := ann.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", "ann")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ann.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: s.GetName(), Event: &kiokuv1.Event{Author: "user", InvocationId: "i", Content: client.Text("user", said)}}); err != nil {
			t.Fatal(err)
		}
		op, err := ann.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: resource.AppName("a"), Source: client.FromSession(s.GetName())})
		if err != nil {
			t.Fatal(err)
		}
		if op, err = ann.WaitOperation(ctx, op.GetName()); err != nil || op.GetError() != nil {
			t.Fatalf("generation %d: %v, %v", i+1, op, err)
		}
	}

	status, out = restCall(t, http.MethodPost, base+"/memories:retrieveProfiles", `{"scope": {"user_id": "ann"}}`, annKey)
	if status != http.StatusOK || nodetest.Path(out, "profiles", "user-profile", "schemaId") != "user-profile" ||
		nodetest.Path(out, "profiles", "user-profile", "profile", "preferred_language") != "Go" ||
		nodetest.Path(out, "profiles", "user-profile", "memories", 0, "memoryType") != "MEMORY_TYPE_STRUCTURED_PROFILE" ||
		nodetest.Path(out, "profiles", "user-profile", "memories", 0, "fact") != "preferred_language: Go" ||
		nodetest.Path(out, "profiles", "user-profile", "memories", 0, "revisionId") != "2" {
		t.Fatalf("RetrieveProfiles: %d %v", status, out)
	}
	name := nodetest.Path(out, "profiles", "user-profile", "memories", 0, "name").(string)
	status, out = restCall(t, http.MethodGet, url+"/v1/"+name+"/revisions", "", annKey)
	if status != http.StatusOK || nodetest.Path(out, "memoryRevisions", 0, "profile", "value") != "Go" || nodetest.Path(out, "memoryRevisions", 1, "profile", "value") != "Python" ||
		!strings.Contains(nodetest.Path(out, "memoryRevisions", 0, "reason").(string), "Python") {
		t.Fatalf("the field's revisions: %d %v", status, out)
	}
	// Listings hold natural-language memories unless asked for profiles.
	status, out = restCall(t, http.MethodGet, base+"/memories", "", appKey)
	if status != http.StatusOK || strings.Contains(rawJSON(out), "STRUCTURED_PROFILE") {
		t.Fatalf("the default listing: %d %v", status, out)
	}
	status, out = restCall(t, http.MethodGet, base+"/memories?memoryTypes=MEMORY_TYPE_STRUCTURED_PROFILE", "", appKey)
	if list, _ := out["memories"].([]any); status != http.StatusOK || len(list) != 1 || nodetest.Path(out, "memories", 0, "profile", "field") != "preferred_language" {
		t.Fatalf("the listing of profile fields: %d %v", status, out)
	}

	// Bob's key reaches nothing of ann's profile.
	status, out = restCall(t, http.MethodPost, base+"/memories:retrieveProfiles", `{"scope": {"user_id": "ann"}}`, bobKey)
	if status != http.StatusForbidden || strings.Contains(rawJSON(out), "Go") {
		t.Fatalf("bob's key retrieving ann's profiles: %d %v", status, out)
	}
	status, out = restCall(t, http.MethodPost, base+"/memories:retrieveProfiles", `{"scope": {"user_id": "bob"}}`, bobKey)
	if status != http.StatusOK || len(out) != 0 {
		t.Fatalf("bob's own profiles: %d %v", status, out)
	}
	if status, out = restCall(t, http.MethodPost, base+"/memories:retrieveProfiles", `{}`, appKey); status != http.StatusBadRequest {
		t.Fatalf("no scope: %d %v", status, out)
	}
}
