package memorydrivertest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/redact"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// secrets are the personal data of testPIIRedaction; none may reach the
// model or a memory.
var secrets = []string{"ann@example.com", "old@example.com", "90-1234-5678", "4111", "EMP-123456", "123-45-6789", "03-1234-5678", "192.0.2.7"}

// noSecret fails when text holds one of the secrets.
func noSecret(t *testing.T, where, text string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s holds %q:\n%s", where, s, text)
		}
	}
}

// testPIIRedaction: with an app's pii_redaction on, the configuration is
// stored and read back; extraction and consolidation send the model no
// personal data (the events, and the memories shown, which were stored
// before redaction was on, are redacted); and memories hold placeholders
// however their facts came: from the model's replies, given directly,
// created or updated directly. A similarity search query is redacted like
// the memories it is compared with.
func testPIIRedaction(t *testing.T, h *harness) {
	// A memory stored while redaction was off keeps its text...
	old := h.create("The user's email is old@example.com.", user1)
	pii := appconfig.Redaction{Enabled: true, Rules: redact.Rules{Patterns: []redact.Pattern{{Name: "EMPLOYEE_ID", Regex: `EMP-[0-9]{6}`}}}}
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", PIIRedaction: pii}, []string{"pii_redaction"}); err != nil {
		t.Fatal(err)
	}
	stored, err := h.store.GetConfig(h.ctx, "app1")
	if err != nil || !cmp.Equal(stored.PIIRedaction, pii) {
		t.Fatalf("stored pii_redaction %+v, %v; want %+v", stored.PIIRedaction, err, pii)
	}
	_, err = h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", PIIRedaction: appconfig.Redaction{Enabled: true, Rules: redact.Rules{Patterns: []redact.Pattern{{Name: "LOOK", Regex: `(?=x)`}}}}}, []string{"pii_redaction"})
	wantKind(t, "a pattern that is not RE2", err, fault.Invalid)
	if !strings.Contains(err.Error(), "pii_redaction.custom_patterns[0] (LOOK)") {
		t.Errorf("the error does not name the pattern: %v", err)
	}
	if stored, _ := h.store.GetConfig(h.ctx, "app1"); !cmp.Equal(stored.PIIRedaction, pii) {
		t.Fatalf("a refused update changed the stored setting: %+v", stored.PIIRedaction)
	}

	// ...and the model, through the real client, is sent placeholders.
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "My email is ann@example.com and my phone is +81 90-1234-5678.", "Pay with 4111 1111 1111 1111; my badge is EMP-123456.")
	// A model may still write personal data back (from elsewhere, or by
	// making it up): its facts are redacted before they are stored.
	h.gemini.ReplyJSON(map[string]any{"facts": []any{
		map[string]any{"fact": "The user's email is ann@example.com.", "topic": "USER_PERSONAL_INFO", "events": []int{1}},
		map[string]any{"fact": "The user pays with the card 4111 1111 1111 1111.", "topic": "USER_PERSONAL_INFO", "events": []int{2}},
	}})
	h.gemini.ReplyJSON(map[string]any{"actions": []any{
		map[string]any{"candidate": 1, "action": "UPDATE", "memory": 1, "fact": "The user's email is ann@example.com (it was old@example.com)."},
		map[string]any{"candidate": 2, "action": "CREATE", "memory": 0, "fact": "The user pays with the card 4111-1111-1111-1111."},
	}})
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	if op = h.op(op); op.State != jobs.Succeeded || len(op.Generated) != 2 {
		t.Fatalf("generation %s, %d generated: %s", op.State, len(op.Generated), op.ErrorMessage)
	}
	calls := h.gemini.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d model calls, want extraction and consolidation", len(calls))
	}
	for i, c := range calls {
		noSecret(t, []string{"the extraction call", "the consolidation call"}[i], c.System+"\n"+c.Text())
	}
	for _, want := range []string{"My email is [EMAIL] and my phone is [PHONE].", "Pay with [CARD]; my badge is [EMPLOYEE_ID]."} {
		if !strings.Contains(calls[0].Text(), want) {
			t.Errorf("the extraction call does not hold %q:\n%s", want, calls[0].Text())
		}
	}
	for _, want := range []string{"[1] The user's email is [EMAIL].", "(1) The user's email is [EMAIL].", "(2) The user pays with the card [CARD]."} {
		if !strings.Contains(calls[1].Text(), want) {
			t.Errorf("the consolidation call does not hold %q:\n%s", want, calls[1].Text())
		}
	}
	got := h.facts(user1)
	want := []string{"The user pays with the card [CARD].", "The user's email is [EMAIL] (it was [EMAIL])."}
	if !cmp.Equal(got, want) {
		t.Errorf("memories %q, want %q", got, want)
	}
	revs, _, err := h.svc.ListRevisions(h.ctx, "app1", old.ID, 0, "")
	if err != nil || len(revs) != 2 {
		t.Fatalf("revisions %v, %v", revs, err)
	}
	noSecret(t, "the generation's revision", revs[0].Fact+" "+strings.Join(revs[0].ExtractedFacts, " "))

	// Facts given directly, and memories created or updated directly.
	direct, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, DisableConsolidation: true,
		Facts: []memorybank.DirectFact{{Fact: "The user's SSN is 123-45-6789."}}})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	if direct = h.op(direct); direct.State != jobs.Succeeded || len(direct.Generated) != 1 || direct.Generated[0].Memory.Fact != "The user's SSN is [GOVERNMENT_ID]." {
		t.Fatalf("a direct fact: %s %+v %s", direct.State, direct.Generated, direct.ErrorMessage)
	}
	m, err := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{Fact: "The user's office phone is 03-1234-5678.", Scope: user1})
	if err != nil || m.Fact != "The user's office phone is [PHONE]." {
		t.Fatalf("CreateMemory: %+v, %v", m, err)
	}
	fact := "The user's laptop is at 192.0.2.7."
	if m, err = h.svc.UpdateMemory(h.ctx, "app1", m.ID, memorybank.MemoryUpdate{Fact: &fact}); err != nil || m.Fact != "The user's laptop is at [IP_ADDRESS]." {
		t.Fatalf("UpdateMemory: %+v, %v", m, err)
	}
	// A rollback to the revision stored before redaction was on restores
	// it redacted.
	if m, err = h.svc.RollbackMemory(h.ctx, "app1", old.ID, "1"); err != nil || m.Fact != "The user's email is [EMAIL]." {
		t.Fatalf("RollbackMemory: %+v, %v", m, err)
	}
	all, _, err := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		noSecret(t, "memory "+m.ID, m.Fact)
	}

	// The query "ann@example.com" is searched as "[EMAIL]", which the
	// memories hold.
	res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "ann@example.com", TopK: 1})
	if err != nil || len(res) != 1 || !strings.Contains(res[0].Memory.Fact, "[EMAIL]") || res[0].Distance >= 1 {
		t.Fatalf("RetrieveMemories: %+v, %v", res, err)
	}

	// A memory of another app stored before its redaction was on keeps
	// its fact, but a change of embedder (which may be a model) embeds it
	// again redacted.
	if _, err := h.svc.CreateMemory(h.ctx, "app2", memorybank.MemoryInput{Fact: "The user's email is ann@example.com.", Scope: user1}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app2", PIIRedaction: appconfig.Redaction{Enabled: true}}, []string{"pii_redaction"}); err != nil {
		t.Fatal(err)
	}
	emb := &recordingEmbedder{}
	if n, err := memorybank.NewService(h.store, memorybank.Config{Embedder: emb, Now: h.clock.Tick}).Reembed(h.ctx); err != nil || n == 0 {
		t.Fatalf("Reembed = %d, %v", n, err)
	}
	embedded := strings.Join(emb.texts, "\n")
	noSecret(t, "a re-embedding", embedded)
	if !strings.Contains(embedded, "The user's email is [EMAIL].") {
		t.Errorf("the memory of app2 was not embedded redacted:\n%s", embedded)
	}
	if kept, _, err := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app2"}); err != nil || len(kept) != 1 || kept[0].Fact != "The user's email is ann@example.com." {
		t.Errorf("the memory of app2 stored before redaction: %+v, %v", kept, err)
	}
}

// recordingEmbedder is an embedder of its own name that records the texts
// it embeds.
type recordingEmbedder struct {
	renamed
	mu    sync.Mutex
	texts []string
}

// Embed implements model.Embedder.
func (e *recordingEmbedder) Embed(ctx context.Context, texts []string, task model.EmbedTask) ([][]float32, error) {
	e.mu.Lock()
	e.texts = append(e.texts, texts...)
	e.mu.Unlock()
	return e.renamed.Embed(ctx, texts, task)
}
