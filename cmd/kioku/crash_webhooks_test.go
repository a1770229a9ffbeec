package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// TestWebhooksSurviveSIGKILL kills `kioku serve` (SQLite) 20 times while
// generations run and webhooks are sent; afterwards every committed
// change of a memory (WatchMemories from cursor 0) has been delivered at
// least once, and no delivery is of a change that was not committed. The
// webhook-id is msg_{app}_{cursor}: the cursor names the change.
func TestWebhooksSurviveSIGKILL(t *testing.T) {
	dataDir := t.TempDir()
	args := []string{"--data-dir", dataDir, "--webhooks-allow-loopback-http", "--webhooks-max-retry-delay", "200ms"}
	var mu sync.Mutex
	delivered := map[string]int{}
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		delivered[r.Header.Get("webhook-id")]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rx.Close()
	ctx := t.Context()
	const kills = 20
	for round := range kills + 1 {
		proc := startKioku(t, args...)
		c := client.New(proc.url)
		if round == 0 {
			_, err := c.UpdateMemoryBankConfig(ctx, &kiokuv1.UpdateMemoryBankConfigRequest{
				MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/crash/memoryBankConfig", Webhooks: []*kiokuv1.Webhook{{Url: rx.URL + "/hook", Events: []string{"memory.created", "memory.updated", "memory.deleted"}}}},
				UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"webhooks"}},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if round == kills {
			break // the last server runs on: its dispatcher sends what is left
		}
		for i := range 3 {
			user := fmt.Sprintf("u%d", (round*3+i)%5)
			var facts []*kiokuv1.DirectMemory
			for j := range 4 {
				facts = append(facts, &kiokuv1.DirectMemory{Fact: fmt.Sprintf("Round %d fact %d of %s.", round, j, user)})
			}
			if _, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{
				Parent: "apps/crash", Scope: client.Scope(user),
				Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: facts}},
			}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Duration(rand.N(300)) * time.Millisecond)
		if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		proc.cmd.Wait()
	}
	// The committed changes, as the feed has them.
	proc := startKioku(t, args...)
	c := client.New(proc.url)
	committed := map[string]bool{}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	for resp, err := range c.WatchMemories(wctx, &kiokuv1.WatchMemoriesRequest{Parent: "apps/crash", StartCursor: "0"}) {
		if err != nil {
			t.Fatal(err)
		}
		committed["msg_crash_"+resp.GetCursor()] = true
	}
	cancel()
	if len(committed) == 0 {
		t.Fatal("no change was committed")
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		missing := 0
		for id := range committed {
			if delivered[id] == 0 {
				missing++
			}
		}
		var invented []string
		for id := range delivered {
			if !committed[id] {
				invented = append(invented, id)
			}
		}
		total := len(delivered)
		mu.Unlock()
		if len(invented) > 0 {
			t.Fatalf("deliveries of changes not committed: %s", strings.Join(invented, ", "))
		}
		if missing == 0 {
			t.Logf("%d committed changes, each delivered (%d webhook-ids) across %d SIGKILLs", len(committed), total, kills)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d committed changes never delivered", missing, len(committed))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
