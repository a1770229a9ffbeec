package main

import (
	"encoding/json"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/memorybank"
)

// TestQuotaCommand: kioku quota get shows an app's generations of today
// against --quota-generations, as a table and as JSON, and an app that
// has made none at zero; a user key may not read it.
func TestQuotaCommand(t *testing.T) {
	key, entry := auth.NewKey("operator", auth.AllApps, "")
	userKey, userEntry := auth.NewKey("ann", "q", "ann")
	_, url := nodetest.Serve(t, node.Config{Keys: nodetest.Keys(t, entry, userEntry), Quotas: memorybank.Quotas{Generations: 5}})
	s := &operatorServer{t: t, url: url, key: key, c: client.New(url, client.WithAuthToken(key))}
	for range 3 {
		if _, err := s.c.GenerateMemories(t.Context(), &kiokuv1.GenerateMemoriesRequest{
			Parent: "apps/q", Scope: client.Scope("ann"),
			Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{
				Memories: []*kiokuv1.DirectMemory{{Fact: "The user likes tea."}},
			}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	today := time.Now().UTC().Format(time.DateOnly)

	out, _, _ := s.kioku(false, "quota", "get", "apps/q")
	has(t, "kioku quota get", out, "apps/q/quotaUsage", today, "generations", "3 of 5", "model tokens", "0 (no quota)", "resets")
	out, _, _ = s.kioku(false, "quota", "get", "apps/idle/quotaUsage")
	has(t, "kioku quota get of an idle app", out, "0 of 5")

	out, _, _ = s.kioku(false, "quota", "get", "apps/q", "--json")
	var got struct {
		Name            string `json:"name"`
		Day             string `json:"day"`
		Generations     string `json:"generations"`
		GenerationQuota string `json:"generationQuota"`
		ResetTime       string `json:"resetTime"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("kioku quota get --json printed %s: %v", out, err)
	}
	if got.Name != "apps/q/quotaUsage" || got.Day != today || got.Generations != "3" || got.GenerationQuota != "5" || got.ResetTime == "" {
		t.Fatalf("kioku quota get --json = %+v", got)
	}

	s.key = userKey
	if _, _, err := s.kioku(true, "quota", "get", "apps/q"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("a user key reading the quota usage: %v; want PERMISSION_DENIED", err)
	}
}
