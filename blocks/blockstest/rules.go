package blockstest

import (
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
)

// testCreateAndGet: Update creates a block with the default limit; Get
// returns it as written.
func testCreateAndGet(t *testing.T, h *Harness) {
	b, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "Name: Ann.", Description: "What the agent knows of the user."})
	if err != nil {
		t.Fatal(err)
	}
	if b.Revision != 1 || b.Limit != blocks.DefaultLimit || b.CreateTime.IsZero() || !b.CreateTime.Equal(b.UpdateTime) {
		t.Errorf("created %+v; want revision 1, the default limit and equal times", b)
	}
	got, err := h.Svc.Get(h.Ctx, annHuman)
	if err != nil {
		t.Fatal(err)
	}
	if *got != *b {
		t.Errorf("got %+v, want %+v", got, b)
	}
	_, err = h.Svc.Get(h.Ctx, bobHuman)
	wantErr(t, "reading a block never written", err, fault.NotFound, bobHuman.Name())
}

// testUpdateReplaces: Update replaces the value, description and
// read-only flag, keeps the limit when none is given and the creation
// time always.
func testUpdateReplaces(t *testing.T, h *Harness) {
	first := h.Put(annHuman, "one", 50)
	b, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "two", Description: "d", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.Value != "two" || b.Description != "d" || !b.ReadOnly || b.Limit != 50 || b.Revision != 2 || !b.CreateTime.Equal(first.CreateTime) || !b.UpdateTime.After(first.UpdateTime) {
		t.Errorf("after the update %+v (first %+v)", b, first)
	}
	if b = h.Put(annHuman, "three", 80); b.Limit != 80 || b.ReadOnly || b.Description != "" {
		t.Errorf("after an update with a limit %+v", b)
	}
}

// testApart: a user's block, another user's, the app's shared one of the
// same label and another app's are four blocks.
func testApart(t *testing.T, h *Harness) {
	for _, k := range []blocks.Key{annHuman, bobHuman, {App: "app1", Label: "human"}, otherHuman} {
		h.Put(k, k.Name(), 0)
	}
	for _, k := range []blocks.Key{annHuman, bobHuman, {App: "app1", Label: "human"}, otherHuman} {
		if got := h.Value(k); got != k.Name() {
			t.Errorf("%s holds %q", k.Name(), got)
		}
	}
	for _, owner := range []struct{ app, user string }{{"app1", "ann"}, {"app1", ""}, {"app2", "ann"}} {
		list, _, err := h.Svc.List(h.Ctx, owner.app, owner.user, 0, "")
		if err != nil || len(list) != 1 || list[0].App != owner.app || list[0].User != owner.user {
			t.Errorf("blocks of %+v: %+v, %v", owner, list, err)
		}
	}
}

// testListAndPage: an owner's blocks in label order, by pages.
func testListAndPage(t *testing.T, h *Harness) {
	labels := []string{"persona", "human", "goals", "a-b", "a_b", "z9"}
	for _, l := range labels {
		h.Put(blocks.Key{App: "app1", User: "ann", Label: l}, l, 0)
	}
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		page, next, err := h.Svc.List(h.Ctx, "app1", "ann", 4, token)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page {
			got = append(got, b.Label)
			if b.Value != b.Label {
				t.Errorf("listed %+v without its value", b)
			}
		}
		if token = next; token == "" {
			if pages != 1 {
				t.Errorf("%d pages of 4 for 6 blocks", pages+1)
			}
			break
		}
	}
	if want := "a-b a_b goals human persona z9"; strings.Join(got, " ") != want {
		t.Errorf("labels %q, want %q", got, want)
	}
}

// testLimits: the limits in characters (code points), of the value, the
// limit itself and the description; refused writes store nothing.
func testLimits(t *testing.T, h *Harness) {
	h.Put(annHuman, "こんにちは", 5) // 5 characters, 15 bytes
	_, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "こんにちは!"})
	wantErr(t, "a value past the limit", err, fault.Invalid, "block.value", "6 characters", "limit is 5")
	for _, limit := range []int{-1, blocks.MaxLimit + 1} {
		_, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "x", Limit: limit})
		wantErr(t, "a limit out of range", err, fault.Invalid, "block.limit", "20,000")
	}
	_, err = h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Description: strings.Repeat("d", blocks.MaxDescriptionChars+1)})
	wantErr(t, "a description past its limit", err, fault.Invalid, "block.description", "1,000")
	for _, label := range []string{"Human", "9lives", "a b", strings.Repeat("a", 64), ""} {
		_, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: blocks.Key{App: "app1", User: "ann", Label: label}, Value: "x"})
		wantErr(t, "label "+label, err, fault.Invalid, "label")
	}
	if got := h.Value(annHuman); got != "こんにちは" {
		t.Errorf("refused writes changed the block: %q", got)
	}
	_, err = h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: bobHuman, Value: strings.Repeat("x", blocks.DefaultLimit+1)})
	wantErr(t, "a new block past the default limit", err, fault.Invalid, "2,000")
}

// testMaxBlocks: an owner has at most MaxBlocks blocks; the app's shared
// blocks are an owner of their own.
func testMaxBlocks(t *testing.T, h *Harness) {
	for i := range blocks.MaxBlocks {
		h.Put(blocks.Key{App: "app1", User: "ann", Label: "b" + string(rune('a'+i))}, "x", 0)
	}
	_, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "x"})
	wantErr(t, "one block too many", err, fault.ResourceExhausted, "20 blocks")
	h.Put(blocks.Key{App: "app1", User: "ann", Label: "ba"}, "y", 0) // an existing one still changes
	h.Put(persona, "x", 0)
	h.Put(bobHuman, "x", 0)
}

// testReadOnly: a read-only block refuses the agent's edits, and
// changes by Update.
func testReadOnly(t *testing.T, h *Harness) {
	if _, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: persona, Value: "I am Hana.", ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	_, err := h.Svc.Append(h.Ctx, persona, "I obey.")
	wantErr(t, "appending to a read-only block", err, fault.FailedPrecondition, "read-only")
	_, err = h.Svc.Replace(h.Ctx, persona, "Hana", "Eve")
	wantErr(t, "replacing in a read-only block", err, fault.FailedPrecondition, "read-only")
	b, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: persona, Value: "I am Hana, a guide.", ReadOnly: true})
	if err != nil || b.Value != "I am Hana, a guide." || b.Revision != 2 {
		t.Errorf("updating a read-only block: %+v, %v", b, err)
	}
}

// testAppend: content goes on a new line; an append past the limit is
// refused naming the limit and the current size; a missing block is
// NotFound.
func testAppend(t *testing.T, h *Harness) {
	h.Put(annHuman, "", 30)
	if b, err := h.Svc.Append(h.Ctx, annHuman, "Likes tea."); err != nil || b.Value != "Likes tea." || b.Revision != 2 {
		t.Fatalf("appending to an empty block: %+v, %v", b, err)
	}
	if b, err := h.Svc.Append(h.Ctx, annHuman, "Lives in Kyoto."); err != nil || b.Value != "Likes tea.\nLives in Kyoto." {
		t.Fatalf("appending: %+v, %v", b, err)
	}
	_, err := h.Svc.Append(h.Ctx, annHuman, "Has a cat.")
	wantErr(t, "appending past the limit", err, fault.FailedPrecondition, `"human"`, "holds 26", "limit of 30 characters", "would make 37")
	_, err = h.Svc.Append(h.Ctx, annHuman, "")
	wantErr(t, "appending nothing", err, fault.Invalid, "content")
	_, err = h.Svc.Append(h.Ctx, bobHuman, "x")
	wantErr(t, "appending to a missing block", err, fault.NotFound, bobHuman.Name())
	if got := h.Value(annHuman); got != "Likes tea.\nLives in Kyoto." {
		t.Errorf("refused appends changed the block: %q", got)
	}
}

// testReplace: the one occurrence is replaced; absent, ambiguous or
// over the limit is refused, saying which.
func testReplace(t *testing.T, h *Harness) {
	h.Put(annHuman, "Likes tea. Likes cats.", 30)
	b, err := h.Svc.Replace(h.Ctx, annHuman, "tea", "green tea")
	if err != nil || b.Value != "Likes green tea. Likes cats." {
		t.Fatalf("replacing: %+v, %v", b, err)
	}
	_, err = h.Svc.Replace(h.Ctx, annHuman, "coffee", "tea")
	wantErr(t, "replacing absent text", err, fault.FailedPrecondition, "does not occur")
	_, err = h.Svc.Replace(h.Ctx, annHuman, "Likes", "Loves")
	wantErr(t, "replacing ambiguous text", err, fault.FailedPrecondition, "occurs 2 times")
	_, err = h.Svc.Replace(h.Ctx, annHuman, "cats", "cats and dogs")
	wantErr(t, "replacing past the limit", err, fault.FailedPrecondition, "limit of 30 characters", "holds 28", "would make 37")
	_, err = h.Svc.Replace(h.Ctx, annHuman, "", "x")
	wantErr(t, "replacing nothing", err, fault.Invalid, "old_content")
	if b, err = h.Svc.Replace(h.Ctx, annHuman, " Likes cats.", ""); err != nil || b.Value != "Likes green tea." {
		t.Errorf("deleting text: %+v, %v", b, err)
	}
}

// testExpectedRevision: with an expected revision the block must be at
// it (0: absent), or nothing is written.
func testExpectedRevision(t *testing.T, h *Harness) {
	at := func(n int64) *int64 { return &n }
	b, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "one", ExpectedRevision: at(0)})
	if err != nil || b.Revision != 1 {
		t.Fatalf("creating with expected revision 0: %+v, %v", b, err)
	}
	_, err = h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "again", ExpectedRevision: at(0)})
	wantErr(t, "creating a block that exists", err, fault.FailedPrecondition, "revision 1, not the expected 0")
	_, err = h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "stale", ExpectedRevision: at(5)})
	wantErr(t, "a stale revision", err, fault.FailedPrecondition, "not the expected 5")
	if b, err = h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "two", ExpectedRevision: at(1)}); err != nil || b.Revision != 2 {
		t.Fatalf("updating at the expected revision: %+v, %v", b, err)
	}
	_, err = h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "x", ExpectedRevision: at(-1)})
	wantErr(t, "a negative revision", err, fault.Invalid, "expected_revision")
	if got := h.Value(annHuman); got != "two" {
		t.Errorf("value %q, want two", got)
	}
}
