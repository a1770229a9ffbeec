package transport_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// memoryFileServer starts a whole kioku with keys for ann and bob (users
// of app a) and an app key of a, and returns its URL and the keys.
func memoryFileServer(t *testing.T) (url, ann, bob, app string) {
	t.Helper()
	annKey, annEntry := auth.NewKey("ann", "a", "ann")
	bobKey, bobEntry := auth.NewKey("bob", "a", "bob")
	appKey, appEntry := auth.NewKey("backend", "a", "")
	keys := nodetest.Keys(t, annEntry, bobEntry, appEntry)
	_, url = serveNode(t, func(c *node.Config) { c.Keys, c.Logger = keys, quietLog() })
	return url, annKey, bobKey, appKey
}

// TestMemoryFilesOverConnect runs the memory tool's commands through
// kioku.v1.MemoryFileService/Execute with a user key, over Connect (JSON
// and binary) and gRPC: the answers are the documented ones, traversal is
// refused and writes nothing, and another user's key reaches nothing.
func TestMemoryFilesOverConnect(t *testing.T) {
	url, annKey, bobKey, _ := memoryFileServer(t)
	for _, proto := range []struct {
		name string
		opts []client.Option
	}{{"connect-json", []client.Option{client.WithJSON()}}, {"connect-proto", nil}, {"grpc", []client.Option{client.WithGRPC()}}} {
		t.Run(proto.name, func(t *testing.T) {
			ann := client.New(url, append(proto.opts, client.WithAuthToken(annKey), client.WithHTTPClient(h2cClient()))...)
			bob := client.New(url, append(proto.opts, client.WithAuthToken(bobKey), client.WithHTTPClient(h2cClient()))...)
			user := "apps/a/users/ann"
			dir := "/memories/" + proto.name
			exec := func(c *client.Client, input map[string]any) *kiokuv1.ExecuteResponse {
				t.Helper()
				in, err := structpb.NewStruct(input)
				if err != nil {
					t.Fatal(err)
				}
				res, err := c.Execute(t.Context(), &kiokuv1.ExecuteRequest{Parent: user, Input: in})
				if err != nil {
					t.Fatalf("Execute(%v): %v", input, err)
				}
				return res
			}
			want := func(input map[string]any, output string, isError bool) {
				t.Helper()
				res := exec(ann, input)
				if res.GetOutput() != output || res.GetIsError() != isError {
					t.Errorf("Execute(%v) = %q (is_error %v); want %q (is_error %v)", input, res.GetOutput(), res.GetIsError(), output, isError)
				}
			}
			want(map[string]any{"command": "create", "path": dir + "/notes.txt", "file_text": "Favorite color: blue\nDrink: tea\n"}, "File created successfully at: "+dir+"/notes.txt", false)
			want(map[string]any{"command": "str_replace", "path": dir + "/notes.txt", "old_str": "blue", "new_str": "green"},
				"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tFavorite color: green\n     2\tDrink: tea", false)
			want(map[string]any{"command": "insert", "path": dir + "/notes.txt", "insert_line": 2, "insert_text": "Pet: cat\n"}, "The file "+dir+"/notes.txt has been edited.", false)
			want(map[string]any{"command": "view", "path": dir + "/notes.txt"},
				"Here's the content of "+dir+"/notes.txt with line numbers:\n     1\tFavorite color: green\n     2\tDrink: tea\n     3\tPet: cat", false)
			want(map[string]any{"command": "view", "path": dir + "/notes.txt", "view_range": []any{2, 3}},
				"Here's the content of "+dir+"/notes.txt with line numbers:\n     2\tDrink: tea\n     3\tPet: cat", false)
			want(map[string]any{"command": "view", "path": dir},
				"Here're the files and directories up to 2 levels deep in "+dir+", excluding hidden items and node_modules:\n42B\t"+dir+"\n42B\t"+dir+"/notes.txt", false)
			want(map[string]any{"command": "rename", "old_path": dir + "/notes.txt", "new_path": dir + "/prefs.txt"}, "Successfully renamed "+dir+"/notes.txt to "+dir+"/prefs.txt", false)
			// Traversal and paths outside /memories: refused, nothing written.
			before, err := ann.ListMemoryFiles(t.Context(), &kiokuv1.ListMemoryFilesRequest{Parent: user, Path: dir, ShowDeleted: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"/memories/../etc/passwd", "/etc/passwd", "/memories/%2e%2e/%2e%2e/etc/passwd", "/memories/..%2F..%2Fetc%2Fpasswd", "memories/notes.txt", "../../etc/passwd", "/memories/..\\..\\etc\\passwd"} {
				for _, in := range []map[string]any{
					{"command": "create", "path": p, "file_text": "root::0:0:root:/root:/bin/sh\n"},
					{"command": "view", "path": p},
					{"command": "rename", "old_path": dir + "/prefs.txt", "new_path": p},
					{"command": "delete", "path": p},
				} {
					if res := exec(ann, in); !res.GetIsError() || !strings.HasPrefix(res.GetOutput(), "Error: The path ") || !strings.Contains(res.GetOutput(), "is not allowed") {
						t.Errorf("Execute(%v) = %q (is_error %v); want a refusal", in, res.GetOutput(), res.GetIsError())
					}
				}
			}
			after, err := ann.ListMemoryFiles(t.Context(), &kiokuv1.ListMemoryFilesRequest{Parent: user, Path: dir, ShowDeleted: true})
			if err != nil || len(after.GetMemoryFiles()) != len(before.GetMemoryFiles()) || after.GetMemoryFiles()[0].GetRevision() != before.GetMemoryFiles()[0].GetRevision() {
				t.Errorf("the files changed under refused paths: %v, %v", after, err)
			}
			// Another user's key sees nothing of ann's files, and writes none.
			in, _ := structpb.NewStruct(map[string]any{"command": "view", "path": "/memories"})
			if _, err := bob.Execute(t.Context(), &kiokuv1.ExecuteRequest{Parent: user, Input: in}); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("bob's key on ann's files: %v, want PERMISSION_DENIED", err)
			}
			res, err := bob.Execute(t.Context(), &kiokuv1.ExecuteRequest{Parent: "apps/a/users/bob", Input: in})
			if err != nil || res.GetIsError() || strings.Contains(res.GetOutput(), "prefs") {
				t.Errorf("bob's own view: %v, %v", res, err)
			}
			file := after.GetMemoryFiles()[0].GetName()
			if _, err := bob.GetMemoryFile(t.Context(), &kiokuv1.GetMemoryFileRequest{Name: file}); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("bob reading ann's file: %v", err)
			}
			if _, err := bob.GetMemoryFile(t.Context(), &kiokuv1.GetMemoryFileRequest{Name: strings.Replace(file, "/ann/", "/bob/", 1)}); connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("bob reading ann's file id under his name: %v, want NOT_FOUND", err)
			}
			// The operators' reads, and the deletion.
			got, err := ann.GetMemoryFile(t.Context(), &kiokuv1.GetMemoryFileRequest{Name: file})
			if err != nil || got.GetPath() != dir+"/prefs.txt" || got.GetContent() != "Favorite color: green\nDrink: tea\nPet: cat\n" || got.GetRevision() != 4 {
				t.Errorf("GetMemoryFile = %v, %v", got, err)
			}
			want(map[string]any{"command": "delete", "path": dir}, "Successfully deleted "+dir, false)
			want(map[string]any{"command": "view", "path": dir + "/prefs.txt"}, "The path "+dir+"/prefs.txt does not exist. Please provide a valid path.", true)
			var actions []string
			for r, err := range ann.AllMemoryFileRevisions(t.Context(), &kiokuv1.ListMemoryFileRevisionsRequest{Parent: file}) {
				if err != nil {
					t.Fatal(err)
				}
				actions = append(actions, r.GetAction().String())
			}
			if strings.Join(actions, " ") != "MEMORY_FILE_ACTION_DELETED MEMORY_FILE_ACTION_RENAMED MEMORY_FILE_ACTION_EDITED MEMORY_FILE_ACTION_EDITED MEMORY_FILE_ACTION_CREATED" {
				t.Errorf("revisions = %v", actions)
			}
			// The caller's own mistakes are errors.
			if _, err := ann.Execute(t.Context(), &kiokuv1.ExecuteRequest{Parent: user}); connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("Execute without input: %v", err)
			}
		})
	}
}

// TestMemoryFilesOverREST makes the same calls through the REST bindings.
func TestMemoryFilesOverREST(t *testing.T) {
	url, annKey, bobKey, appKey := memoryFileServer(t)
	base := url + "/v1/apps/a/users/ann/memoryFiles"
	execute := func(key string, input map[string]any) (int, map[string]any) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"input": input})
		return restCall(t, http.MethodPost, base+":execute", string(body), key)
	}
	status, out := execute(annKey, map[string]any{"command": "create", "path": "/memories/rest.md", "file_text": "line one\n"})
	if status != http.StatusOK || out["output"] != "File created successfully at: /memories/rest.md" || out["isError"] != nil {
		t.Fatalf("create over REST: %d %v", status, out)
	}
	status, out = execute(annKey, map[string]any{"command": "view", "path": "/memories/rest.md"})
	if status != http.StatusOK || out["output"] != "Here's the content of /memories/rest.md with line numbers:\n     1\tline one" {
		t.Errorf("view over REST: %d %v", status, out)
	}
	for _, p := range []string{"/memories/../etc/passwd", "/etc/passwd", "/memories/%2e%2e/etc/passwd", "memories"} {
		status, out = execute(annKey, map[string]any{"command": "create", "path": p, "file_text": "x"})
		if status != http.StatusOK || out["isError"] != true || !strings.Contains(out["output"].(string), "is not allowed") {
			t.Errorf("create %s over REST: %d %v", p, status, out)
		}
	}
	status, out = restCall(t, http.MethodGet, base, "", annKey)
	files, _ := out["memoryFiles"].([]any)
	if status != http.StatusOK || len(files) != 1 || nodetest.Path(out, "memoryFiles", 0, "path") != "/memories/rest.md" || nodetest.Path(out, "memoryFiles", 0, "sizeBytes") != "9" {
		t.Fatalf("list over REST: %d %v", status, out)
	}
	name := nodetest.Path(out, "memoryFiles", 0, "name").(string)
	status, out = restCall(t, http.MethodGet, url+"/v1/"+name, "", annKey)
	if status != http.StatusOK || out["content"] != "line one\n" {
		t.Errorf("get over REST: %d %v", status, out)
	}
	status, out = restCall(t, http.MethodGet, url+"/v1/"+name+"/revisions", "", annKey)
	if status != http.StatusOK || nodetest.Path(out, "memoryFileRevisions", 0, "action") != "MEMORY_FILE_ACTION_CREATED" {
		t.Errorf("revisions over REST: %d %v", status, out)
	}
	status, out = restCall(t, http.MethodGet, base+"?path=/memories/rest.md", "", annKey)
	if files, _ := out["memoryFiles"].([]any); status != http.StatusOK || len(files) != 1 {
		t.Errorf("list of one path over REST: %d %v", status, out)
	}
	// Another user's key, and names that try to leave the user.
	if status, out = execute(bobKey, map[string]any{"command": "view", "path": "/memories/rest.md"}); status != http.StatusForbidden {
		t.Errorf("bob's key executing on ann's files over REST: %d %v", status, out)
	}
	for _, u := range []string{base, url + "/v1/" + name, url + "/v1/apps/a/users/bob/memoryFiles/..%2F..%2Fann%2FmemoryFiles", url + "/v1/apps/a/users/bob/memoryFiles/%2e%2e"} {
		status, out = restCall(t, http.MethodGet, u, "", bobKey)
		if status == http.StatusOK || strings.Contains(rawJSON(out), "line one") || strings.Contains(rawJSON(out), "rest.md") {
			t.Errorf("GET %s with bob's key: %d %v", u, status, out)
		}
	}
	// The app's key reaches every user of the app, and erasing ann
	// removes her files.
	status, out = restCall(t, http.MethodDelete, url+"/v1/apps/a/users/ann", "", appKey)
	if status != http.StatusOK || out["deletedMemoryFiles"] != "1" {
		t.Errorf("erasing ann: %d %v", status, out)
	}
	if status, out = restCall(t, http.MethodGet, base+"?showDeleted=true", "", appKey); status != http.StatusOK || len(out) != 0 {
		t.Errorf("ann's files after her erasure: %d %v", status, out)
	}
}

func rawJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
