package blocks

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/redact"
	"github.com/kioku-ai/kioku/resource"
)

// Config configures a Service.
type Config struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Redactor returns the redactor of an app's pii_redaction (nil: the
	// app redacts nothing). Nil: no redaction.
	Redactor func(ctx context.Context, app string) (*redact.Redactor, error)
	// MaxAttempts bounds how often a write is computed again when a
	// concurrent write to the same block won the race. Default 10; past
	// it the write fails with Aborted.
	MaxAttempts int
}

// Service reads and writes blocks on a Store. It is safe for concurrent
// use.
type Service struct {
	store    Store
	now      func() time.Time
	redactor func(ctx context.Context, app string) (*redact.Redactor, error)
	attempts int
}

// NewService returns a Service on a store.
func NewService(store Store, cfg Config) *Service {
	cfg.Now, _ = aip.Clock(cfg.Now, nil)
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	return &Service{store: store, now: cfg.Now, redactor: cfg.Redactor, attempts: cfg.MaxAttempts}
}

// validateKey checks a block's key; field is the request field of its
// name.
func validateKey(field string, k Key) error {
	if err := resource.ValidateID("app id", k.App, resource.AppIDChars); err != nil {
		return err
	}
	if k.User != "" {
		if err := resource.ValidateID("user id", k.User, resource.UserIDChars); err != nil {
			return err
		}
	}
	return resource.ValidateBlockLabel(field+" label", k.Label)
}

// chars returns the characters (code points) of s.
func chars(s string) int { return utf8.RuneCountInString(s) }

// Get returns a block.
func (s *Service) Get(ctx context.Context, k Key) (*Block, error) {
	if err := validateKey("name", k); err != nil {
		return nil, err
	}
	return s.get(ctx, k)
}

// get returns a stored block, or NotFound naming it.
func (s *Service) get(ctx context.Context, k Key) (*Block, error) {
	b, err := s.store.Get(ctx, k)
	if fault.Is(err, fault.NotFound) {
		return nil, fault.NotFoundf("block %s not found", k.Name())
	}
	return b, err
}

// List returns a page of an owner's blocks (user empty: the app's shared
// blocks) in label order, and the next page's token ("" at the end).
func (s *Service) List(ctx context.Context, app, user string, pageSize int32, pageToken string) ([]*Block, string, error) {
	if err := validateKey("parent", Key{App: app, User: user, Label: "x"}); err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", pageSize)
	if err != nil {
		return nil, "", err
	}
	query := aip.QueryDigest("blocks", app, user)
	tok, err := aip.DecodePageToken(pageToken, query)
	if err != nil {
		return nil, "", err
	}
	list, err := s.store.List(ctx, app, user, tok.ID, size+1)
	if err != nil {
		return nil, "", err
	}
	page, next := aip.Page(list, size, query, func(b *Block) aip.PageToken { return aip.PageToken{ID: b.Label} })
	return page, next, nil
}

// ListRevisions returns a page of a block's revisions, newest first, and
// the next page's token.
func (s *Service) ListRevisions(ctx context.Context, k Key, pageSize int32, pageToken string) ([]*Revision, string, error) {
	if err := validateKey("parent", k); err != nil {
		return nil, "", err
	}
	if _, err := s.get(ctx, k); err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", pageSize)
	if err != nil {
		return nil, "", err
	}
	query := aip.QueryDigest("blockrevisions", k.App, k.User, k.Label)
	tok, err := aip.DecodePageToken(pageToken, query)
	if err != nil {
		return nil, "", err
	}
	list, err := s.store.ListRevisions(ctx, k, tok.Seq, size+1)
	if err != nil {
		return nil, "", err
	}
	page, next := aip.Page(list, size, query, func(r *Revision) aip.PageToken { return aip.PageToken{Seq: r.Number} })
	return page, next, nil
}

// Delete removes a block with its revisions.
func (s *Service) Delete(ctx context.Context, k Key) error {
	if err := validateKey("name", k); err != nil {
		return err
	}
	err := s.store.Delete(ctx, k)
	if fault.Is(err, fault.NotFound) {
		return fault.NotFoundf("block %s not found", k.Name())
	}
	return err
}

// EraseUser removes every block of a user with their revisions, for a
// data-subject request, and returns how many it removed. The app's shared
// blocks stay.
func (s *Service) EraseUser(ctx context.Context, app, user string) (int, error) {
	if err := resource.ValidateID("app id", app, resource.AppIDChars); err != nil {
		return 0, err
	}
	if err := resource.ValidateID("user id", user, resource.UserIDChars); err != nil {
		return 0, err
	}
	return s.store.DeleteUser(ctx, app, user)
}

// redact returns text redacted as the app's pii_redaction says.
func (s *Service) redact(ctx context.Context, app, text string) (string, error) {
	if s.redactor == nil || text == "" {
		return text, nil
	}
	r, err := s.redactor(ctx, app)
	if err != nil || r == nil {
		return text, err
	}
	return r.Redact(text), nil
}

// change computes a block's next state from its current one (nil: none)
// and the time of the write; it returns the new block and the action of
// its revision.
type change func(cur *Block, now time.Time) (*Block, Action, error)

// write applies a change to a block: it reads the block, computes the
// change and writes it if the block is still at the revision read. A write
// that lost a race is computed again on what the winner left, up to
// MaxAttempts; with expected set, the block must be at that revision
// (FailedPrecondition otherwise). The revision records sources.
func (s *Service) write(ctx context.Context, k Key, expected *int64, sources []Source, fn change) (*Block, error) {
	for attempt := 1; ; attempt++ {
		cur, err := s.store.Get(ctx, k)
		switch {
		case fault.Is(err, fault.NotFound):
			cur = nil
		case err != nil:
			return nil, err
		}
		var at int64
		if cur != nil {
			at = cur.Revision
		}
		if expected != nil && *expected != at {
			return nil, fault.New(fault.FailedPrecondition, "block %s is at revision %d, not the expected %d; read it again and retry", k.Name(), at, *expected)
		}
		b, action, err := fn(cur, s.now())
		if err != nil {
			return nil, err
		}
		b.Key, b.Revision, b.CreateTime = k, at+1, b.UpdateTime
		if cur != nil {
			b.CreateTime = cur.CreateTime
		}
		err = s.store.Write(ctx, b, revisionOf(b, action, sources), at)
		if err == nil {
			return b, nil
		}
		// Another write of the block may have won: compute the change
		// again on what it left.
		if err := fault.Backoff(ctx, err, attempt, s.attempts); err != nil {
			return nil, err
		}
	}
}
