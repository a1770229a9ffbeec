package blocks

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
)

// UpdateRequest writes a block: creates it, or replaces its value,
// description and read-only flag (and its limit, when Limit is set).
type UpdateRequest struct {
	Key
	Value       string
	Description string
	// Limit is the block's limit in characters; 0 keeps the block's
	// (DefaultLimit for a new block).
	Limit    int
	ReadOnly bool
	// ExpectedRevision, when set, is the revision the block must be at
	// (0: it must not exist).
	ExpectedRevision *int64
}

// Update creates or replaces a block (see UpdateRequest).
func (s *Service) Update(ctx context.Context, r UpdateRequest) (*Block, error) {
	if err := validateKey("block.name", r.Key); err != nil {
		return nil, err
	}
	if r.ExpectedRevision != nil && *r.ExpectedRevision < 0 {
		return nil, fault.InvalidField("expected_revision", "expected_revision must not be negative")
	}
	if r.Limit < 0 || r.Limit > MaxLimit {
		return nil, fault.InvalidField("block.limit", "block.limit is %d; it must be from 1 to %s characters (0 keeps the block's, %s for a new block)", r.Limit, group(MaxLimit), group(DefaultLimit))
	}
	if err := validText("block.value", r.Value); err != nil {
		return nil, err
	}
	if err := validText("block.description", r.Description); err != nil {
		return nil, err
	}
	if n := chars(r.Description); n > MaxDescriptionChars {
		return nil, fault.InvalidField("block.description", "block.description is %s characters; the limit is %s", group(n), group(MaxDescriptionChars))
	}
	value, err := s.redact(ctx, r.App, r.Value)
	if err != nil {
		return nil, err
	}
	return s.write(ctx, r.Key, r.ExpectedRevision, nil, func(cur *Block, now time.Time) (*Block, Action, error) {
		limit := r.Limit
		switch {
		case limit > 0:
		case cur != nil:
			limit = cur.Limit
		default:
			limit = DefaultLimit
		}
		if n := chars(value); n > limit {
			return nil, 0, fault.InvalidField("block.value", "block.value is %s characters; the block's limit is %s (block.limit raises it, up to %s)", group(n), group(limit), group(MaxLimit))
		}
		return &Block{Value: value, Description: r.Description, Limit: limit, ReadOnly: r.ReadOnly, UpdateTime: now}, Updated, nil
	})
}

// Append adds content to a block's value, on a new line after a value
// that is not empty: the agent's core_memory_append. A read-only block,
// and a value the content would take past the limit, are refused with
// FailedPrecondition.
func (s *Service) Append(ctx context.Context, k Key, content string) (*Block, error) {
	if err := validateKey("name", k); err != nil {
		return nil, err
	}
	if content == "" {
		return nil, fault.InvalidField("content", "content is required: the text to append")
	}
	if err := validText("content", content); err != nil {
		return nil, err
	}
	content, err := s.redact(ctx, k.App, content)
	if err != nil {
		return nil, err
	}
	return s.write(ctx, k, nil, nil, func(cur *Block, now time.Time) (*Block, Action, error) {
		if err := editable(k, cur); err != nil {
			return nil, 0, err
		}
		value := content
		if cur.Value != "" {
			value = cur.Value + "\n" + content
		}
		if n := chars(value); n > cur.Limit {
			return nil, 0, fault.New(fault.FailedPrecondition, "block %q holds %s of its limit of %s characters; appending %s would make %s: append less, or replace old text with core_memory_replace",
				k.Label, group(chars(cur.Value)), group(cur.Limit), group(chars(content)), group(n))
		}
		return edited(cur, value, now), Appended, nil
	})
}

// Replace replaces the one occurrence of old in a block's value with
// new: the agent's core_memory_replace. old must occur exactly once; a
// read-only block, and a value the replacement would take past the
// limit, are refused with FailedPrecondition.
func (s *Service) Replace(ctx context.Context, k Key, old, new string) (*Block, error) {
	if err := validateKey("name", k); err != nil {
		return nil, err
	}
	if old == "" {
		return nil, fault.InvalidField("old_content", "old_content is required: the text to replace, as the block holds it")
	}
	if err := validText("old_content", old); err != nil {
		return nil, err
	}
	if err := validText("new_content", new); err != nil {
		return nil, err
	}
	new, err := s.redact(ctx, k.App, new)
	if err != nil {
		return nil, err
	}
	return s.write(ctx, k, nil, nil, func(cur *Block, now time.Time) (*Block, Action, error) {
		if err := editable(k, cur); err != nil {
			return nil, 0, err
		}
		switch n := strings.Count(cur.Value, old); {
		case n == 0:
			return nil, 0, fault.New(fault.FailedPrecondition, "old_content does not occur in block %q; give the text exactly as the block holds it", k.Label)
		case n > 1:
			return nil, 0, fault.New(fault.FailedPrecondition, "old_content occurs %d times in block %q; give more of the text around it, so that it occurs once", n, k.Label)
		}
		value := strings.Replace(cur.Value, old, new, 1)
		if n := chars(value); n > cur.Limit {
			return nil, 0, fault.New(fault.FailedPrecondition, "block %q holds %s of its limit of %s characters; this replacement would make %s: write a shorter new_content, or replace more old text",
				k.Label, group(chars(cur.Value)), group(cur.Limit), group(n))
		}
		return edited(cur, value, now), Replaced, nil
	})
}

// RewriteRequest is a block's new value from the background rewrite,
// which a model wrote from sessions' events.
type RewriteRequest struct {
	Key
	Value string
	// Revision is the revision of the block the value was written from:
	// the block must still be at it, so that an edit made meanwhile (the
	// agent's, the application's) is never overwritten unseen.
	Revision int64
	// Sources are the sessions, and their events, the value was written
	// from; the revision keeps them.
	Sources []Source
}

// Rewrite replaces a block's value with the background rewrite's. Like
// the agent's edits, it refuses a read-only block and a value past the
// block's limit (FailedPrecondition, naming the limit); a block that
// moved on past r.Revision is FailedPrecondition too, and nothing is
// written.
func (s *Service) Rewrite(ctx context.Context, r RewriteRequest) (*Block, error) {
	if err := validateKey("name", r.Key); err != nil {
		return nil, err
	}
	if r.Revision < 1 {
		return nil, fault.InvalidField("revision", "revision is %d; give the revision of the block the value was written from (1 or more)", r.Revision)
	}
	if err := validText("value", r.Value); err != nil {
		return nil, err
	}
	for i, src := range r.Sources {
		if src.Session == "" {
			return nil, fault.InvalidField("sources", "sources[%d] names no session", i)
		}
	}
	value, err := s.redact(ctx, r.App, r.Value)
	if err != nil {
		return nil, err
	}
	return s.write(ctx, r.Key, &r.Revision, r.Sources, func(cur *Block, now time.Time) (*Block, Action, error) {
		if err := editable(r.Key, cur); err != nil {
			return nil, 0, err
		}
		if n := chars(value); n > cur.Limit {
			return nil, 0, fault.New(fault.FailedPrecondition, "the rewrite of block %q is %s characters, past its limit of %s", r.Label, group(n), group(cur.Limit))
		}
		return edited(cur, value, now), Rewritten, nil
	})
}

// editable refuses the agent's edit of a block that does not exist or is
// read-only.
func editable(k Key, cur *Block) error {
	if cur == nil {
		return fault.NotFoundf("block %s not found", k.Name())
	}
	if cur.ReadOnly {
		return fault.New(fault.FailedPrecondition, "block %q is read-only: the agent cannot edit it", k.Label)
	}
	return nil
}

// edited returns cur with a new value, at now.
func edited(cur *Block, value string, now time.Time) *Block {
	b := *cur
	b.Value, b.UpdateTime = value, now
	return &b
}

// validText refuses text that is not valid UTF-8.
func validText(field, s string) error {
	if !utf8.ValidString(s) {
		return fault.InvalidField(field, "%s is not valid UTF-8", field)
	}
	return nil
}

// group writes n with thousands separators (20,000), as messages write
// limits.
func group(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
