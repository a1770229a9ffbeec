package transport_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// TestBlocksOverTheAPI: BlockService over a whole server, through the Go
// client and REST: a user's block and an app's shared one created,
// edited and listed; the refusals get the codes the API documents, with
// messages a model can act on.
func TestBlocksOverTheAPI(t *testing.T) {
	c, _ := startNode(t, false)
	kc := client.New(c.url, client.WithHTTPClient(h2cClient()))
	ctx := t.Context()
	const human = "apps/a/users/ann/blocks/human"

	// REST: PATCH creates, for both name forms.
	status, body := send(t, http.MethodPatch, c.url+"/v1/"+human, "application/json", `{"value":"Name: Ann.","limit":40,"description":"The user."}`, nil)
	if status != http.StatusOK || !strings.Contains(body, `"revision":"1"`) || !strings.Contains(body, `"label":"human"`) {
		t.Fatalf("PATCH a user's block: %d %s", status, body)
	}
	status, body = send(t, http.MethodPatch, c.url+"/v1/apps/a/blocks/persona", "application/json", `{"value":"I am Hana.","readOnly":true}`, nil)
	if status != http.StatusOK || !strings.Contains(body, `"name":"apps/a/blocks/persona"`) {
		t.Fatalf("PATCH an app's block: %d %s", status, body)
	}
	status, body = send(t, http.MethodPost, c.url+"/v1/"+human+":append", "application/json", `{"content":"Likes tea."}`, nil)
	if status != http.StatusOK || !strings.Contains(body, `"value":"Name: Ann.\nLikes tea."`) {
		t.Fatalf("POST :append: %d %s", status, body)
	}
	b, err := kc.ReplaceInBlock(ctx, &kiokuv1.ReplaceInBlockRequest{Name: human, OldContent: "tea", NewContent: "green tea"})
	if err != nil || b.GetValue() != "Name: Ann.\nLikes green tea." || b.GetRevision() != 3 || b.GetLimit() != 40 {
		t.Fatalf("ReplaceInBlock: %v, %v", b, err)
	}
	status, body = send(t, http.MethodGet, c.url+"/v1/apps/a/blocks", "", "", nil)
	var list struct{ Blocks []struct{ Name string } }
	if status != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Blocks) != 1 || list.Blocks[0].Name != "apps/a/blocks/persona" {
		t.Fatalf("GET the app's blocks: %d %s", status, body)
	}
	status, body = send(t, http.MethodGet, c.url+"/v1/"+human+"/revisions?pageSize=2", "", "", nil)
	if status != http.StatusOK || !strings.Contains(body, human+"/revisions/3") || !strings.Contains(body, "BLOCK_ACTION_REPLACED") || !strings.Contains(body, "nextPageToken") {
		t.Fatalf("GET revisions: %d %s", status, body)
	}

	// The refusals.
	for _, tc := range []struct {
		what  string
		call  func() error
		code  connect.Code
		words []string
	}{
		{"an append past the limit", func() error {
			_, err := kc.AppendToBlock(ctx, &kiokuv1.AppendToBlockRequest{Name: human, Content: "Lives in Kyoto, near the river."})
			return err
		}, connect.CodeFailedPrecondition, []string{"limit of 40 characters", "holds 27"}},
		{"an edit of a read-only block", func() error {
			_, err := kc.AppendToBlock(ctx, &kiokuv1.AppendToBlockRequest{Name: "apps/a/blocks/persona", Content: "x"})
			return err
		}, connect.CodeFailedPrecondition, []string{"read-only"}},
		{"a stale expected revision", func() error {
			_, err := kc.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: &kiokuv1.Block{Name: human, Value: "x"}, ExpectedRevision: new(int64(1))})
			return err
		}, connect.CodeFailedPrecondition, []string{"revision 3, not the expected 1"}},
		{"a bad label", func() error {
			_, err := kc.GetBlock(ctx, &kiokuv1.GetBlockRequest{Name: "apps/a/users/ann/blocks/Human"})
			return err
		}, connect.CodeInvalidArgument, []string{"label", "lower-case"}},
		{"a missing block", func() error {
			_, err := kc.DeleteBlock(ctx, &kiokuv1.DeleteBlockRequest{Name: "apps/a/users/ann/blocks/goals"})
			return err
		}, connect.CodeNotFound, []string{"apps/a/users/ann/blocks/goals"}},
		{"no block", func() error {
			_, err := kc.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{})
			return err
		}, connect.CodeInvalidArgument, []string{"block is required"}},
	} {
		err := tc.call()
		if connect.CodeOf(err) != tc.code {
			t.Errorf("%s: %v; want %v", tc.what, err, tc.code)
			continue
		}
		for _, w := range tc.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.what, err, w)
			}
		}
	}
}

// TestBlocksRedacted: with the app's pii_redaction on, what UpdateBlock,
// AppendToBlock and ReplaceInBlock write is redacted, as memories are.
func TestBlocksRedacted(t *testing.T) {
	c, _ := startNode(t, false)
	kc := client.New(c.url, client.WithHTTPClient(h2cClient()))
	ctx := t.Context()
	if _, err := c.memories.UpdateMemoryBankConfig(ctx, req(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/a/memoryBankConfig", PiiRedaction: &kiokuv1.PiiRedaction{Enabled: true}},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"pii_redaction"}},
	})); err != nil {
		t.Fatal(err)
	}
	const human = "apps/a/users/ann/blocks/human"
	if _, err := kc.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: &kiokuv1.Block{Name: human, Value: "Mail: ann@example.com."}}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.AppendToBlock(ctx, &kiokuv1.AppendToBlockRequest{Name: human, Content: "Phone: +1 212 555 0199."}); err != nil {
		t.Fatal(err)
	}
	b, err := kc.ReplaceInBlock(ctx, &kiokuv1.ReplaceInBlockRequest{Name: human, OldContent: "Mail: [EMAIL].", NewContent: "Mail: ann.new@example.com."})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Mail: [EMAIL].\nPhone: [PHONE]."; b.GetValue() != want {
		t.Errorf("stored %q, want %q", b.GetValue(), want)
	}
	// Another app, without redaction, keeps what it is given.
	b, err = kc.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: &kiokuv1.Block{Name: "apps/other/users/ann/blocks/human", Value: "Mail: ann@example.com."}})
	if err != nil || b.GetValue() != "Mail: ann@example.com." {
		t.Errorf("without redaction: %v, %v", b, err)
	}
}
