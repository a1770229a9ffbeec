package archive

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/resource"
)

// The records of the core memory blocks (format version 4), as they are
// encoded. They are the format: a field changes only with a new Version.
type (
	blockRecord struct {
		Kind        Kind      `json:"kind"`
		Name        string    `json:"name"`
		Value       string    `json:"value"`
		Description string    `json:"description,omitempty"`
		Limit       int       `json:"limit"`
		ReadOnly    bool      `json:"read_only,omitempty"`
		Revision    int64     `json:"revision"`
		CreateTime  time.Time `json:"create_time,omitzero"`
		UpdateTime  time.Time `json:"update_time,omitzero"`
	}
	blockRevisionRecord struct {
		Kind        Kind      `json:"kind"`
		Name        string    `json:"name"`
		Action      string    `json:"action"`
		Value       string    `json:"value"`
		Description string    `json:"description,omitempty"`
		Limit       int       `json:"limit"`
		ReadOnly    bool      `json:"read_only,omitempty"`
		CreateTime  time.Time `json:"create_time,omitzero"`
		// Sources are a rewrite's (blocks.Source's JSON form).
		Sources []blocks.Source `json:"sources,omitempty"`
	}
)

// Block writes a block record.
func (w *Writer) Block(b *blocks.Block) error {
	return w.write(KindBlock, blockRecord{
		Kind: KindBlock, Name: b.Name(), Value: b.Value, Description: b.Description, Limit: b.Limit, ReadOnly: b.ReadOnly,
		Revision: b.Revision, CreateTime: b.CreateTime.UTC(), UpdateTime: b.UpdateTime.UTC(),
	})
}

// BlockRevision writes a block_revision record.
func (w *Writer) BlockRevision(r *blocks.Revision) error {
	return w.write(KindBlockRevision, blockRevisionRecord{
		Kind: KindBlockRevision, Name: r.Name(), Action: r.Action.String(), Value: r.Value, Description: r.Description,
		Limit: r.Limit, ReadOnly: r.ReadOnly, CreateTime: r.CreateTime.UTC(), Sources: r.Sources,
	})
}

// decodeBlockRecord decodes a block or block_revision record into rec,
// refusing what the API would not have written.
func decodeBlockRecord(rec *Record, line []byte) error {
	if rec.Kind == KindBlock {
		var m blockRecord
		if err := strict(line, &m); err != nil {
			return err
		}
		app, user, label, err := resource.ParseBlock("name", m.Name)
		if err != nil {
			return err
		}
		if m.Revision < 1 {
			return fmt.Errorf("revision %d is not a revision number (from 1)", m.Revision)
		}
		rec.Block = &blocks.Block{Key: blocks.Key{App: app, User: user, Label: label}, Value: m.Value, Description: m.Description,
			Limit: m.Limit, ReadOnly: m.ReadOnly, Revision: m.Revision, CreateTime: m.CreateTime, UpdateTime: m.UpdateTime}
		return checkBlockText(m.Value, m.Description, m.Limit)
	}
	var m blockRevisionRecord
	if err := strict(line, &m); err != nil {
		return err
	}
	v, ok := resource.UserBlockRevision.Match(m.Name)
	if !ok {
		if v, ok = resource.AppBlockRevision.Match(m.Name); ok {
			v = []string{v[0], "", v[1], v[2]}
		}
	}
	if !ok {
		return fmt.Errorf("name %q is not of the form %s or %s", aip.Truncate(m.Name, 200), resource.UserBlockRevision, resource.AppBlockRevision)
	}
	app, user, label, err := resource.ParseBlock("name", resource.BlockName(v[0], v[1], v[2]))
	if err != nil {
		return err
	}
	var n int64
	if _, err := fmt.Sscanf(v[3], "%d", &n); err != nil || n < 1 || fmt.Sprint(n) != v[3] {
		return fmt.Errorf("name %q: the revision is not a number from 1", aip.Truncate(m.Name, 200))
	}
	action, err := blocks.ParseAction(m.Action)
	if err != nil {
		return err
	}
	for i, src := range m.Sources {
		if _, _, _, err := resource.ParseSession("sources.session", src.Session); err != nil {
			return fmt.Errorf("sources[%d]: %w", i, err)
		}
	}
	rec.BlockRevision = &blocks.Revision{Key: blocks.Key{App: app, User: user, Label: label}, Number: n, Action: action, Value: m.Value,
		Description: m.Description, Limit: m.Limit, ReadOnly: m.ReadOnly, CreateTime: m.CreateTime, Sources: m.Sources}
	return checkBlockText(m.Value, m.Description, m.Limit)
}

// checkBlockText refuses a value, description or limit the API would
// not have stored.
func checkBlockText(value, description string, limit int) error {
	switch {
	case limit < 1 || limit > blocks.MaxLimit:
		return fmt.Errorf("limit %d is not from 1 to %d", limit, blocks.MaxLimit)
	case utf8.RuneCountInString(value) > limit:
		return fmt.Errorf("the value is %d characters, over the block's limit of %d", utf8.RuneCountInString(value), limit)
	case utf8.RuneCountInString(description) > blocks.MaxDescriptionChars:
		return fmt.Errorf("the description is %d characters, over the limit of %d", utf8.RuneCountInString(description), blocks.MaxDescriptionChars)
	}
	return nil
}

// blockChecker checks the blocks of an archive: none twice, revisions
// following their block, at most blocks.MaxBlocks per owner.
type blockChecker struct {
	cur   blocks.Key // the block whose revisions follow
	seen  map[blocks.Key]bool
	owned map[[2]string]int
}

func newBlockChecker() *blockChecker {
	return &blockChecker{seen: map[blocks.Key]bool{}, owned: map[[2]string]int{}}
}

// check checks a block or block_revision record; end clears the block
// whose revisions follow, for any other record.
func (c *blockChecker) check(rec *Record) error {
	if rec.Kind == KindBlockRevision {
		if r := rec.BlockRevision; r.Key != c.cur {
			return fmt.Errorf("revision %s does not follow its block's record", r.Name())
		}
		return nil
	}
	c.cur = blocks.Key{}
	if rec.Kind != KindBlock {
		return nil
	}
	b := rec.Block
	if c.seen[b.Key] {
		return fmt.Errorf("block %s appears twice in the archive; nothing was merged", b.Name())
	}
	c.seen[b.Key], c.cur = true, b.Key
	owner := [2]string{b.App, b.User}
	if c.owned[owner]++; c.owned[owner] > blocks.MaxBlocks {
		return fmt.Errorf("%s has more than %d blocks in the archive, the limit", b.Owner(), blocks.MaxBlocks)
	}
	return nil
}
