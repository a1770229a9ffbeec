package memoryfiles

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/resource"
)

// Config configures a Service.
type Config struct {
	// Now and NewID are the clock and the id source (defaults: time.Now
	// and random ids of 20 lower-case letters and digits).
	Now   func() time.Time
	NewID func() string
	// MaxAttempts bounds how often a command is computed again when a
	// concurrent write to the same user's files won the race. Default 10;
	// past it the command fails with Aborted.
	MaxAttempts int
}

// Service runs the memory tool's commands and the operators' reads on a
// Store. It is safe for concurrent use.
type Service struct {
	store    Store
	now      func() time.Time
	newID    func() string
	attempts int
}

// NewService returns a Service on a store.
func NewService(store Store, cfg Config) *Service {
	cfg.Now, cfg.NewID = aip.Clock(cfg.Now, cfg.NewID)
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	return &Service{store: store, now: cfg.Now, newID: cfg.NewID, attempts: cfg.MaxAttempts}
}

// Result is the memory tool's answer to one command: the text to return
// to the model as the tool's result, and whether it reports an error (the
// command then changed nothing).
type Result struct {
	Output  string
	IsError bool
}

// validateUser checks the ids of a user of an app.
func validateUser(app, user string) error {
	if err := resource.ValidateID("app id", app, resource.AppIDChars); err != nil {
		return err
	}
	return resource.ValidateID("user id", user, resource.UserIDChars)
}

// Execute runs one command of the memory tool for a user: input is the
// tool's input object as the model wrote it ({"command": "view", "path":
// "/memories"}). What the model got wrong (an unknown command, a missing
// parameter, a path outside Root, a file over a limit) is an answer with
// IsError set, which the model reads and can act on; the error return is
// for the caller's mistakes (the app or user id) and the store's failures.
//
// Commands of one user are serialised by the usage version (see
// Store.Write): a command that loses a race with another write of the same
// user is computed again on what that write left, so concurrent edits of
// one file never lose an update.
func (s *Service) Execute(ctx context.Context, app, user string, input map[string]any) (*Result, error) {
	if err := validateUser(app, user); err != nil {
		return nil, err
	}
	c, err := parseCommand(input)
	if err != nil {
		return answer(err)
	}
	for attempt := 1; ; attempt++ {
		out, w, err := s.attempt(ctx, app, user, c)
		if err != nil {
			return answer(err)
		}
		if w == nil {
			return &Result{Output: out}, nil
		}
		err = s.store.Write(ctx, w)
		if err == nil {
			return &Result{Output: out}, nil
		}
		// Another write of the user may have won: compute the command
		// again on what it left.
		if err := fault.Backoff(ctx, err, attempt, s.attempts); err != nil {
			return nil, err
		}
	}
}

// attempt computes a command on the user's files as they are now.
func (s *Service) attempt(ctx context.Context, app, user string, c *command) (string, *Write, error) {
	usage, err := s.store.Usage(ctx, app, user)
	if err != nil {
		return "", nil, err
	}
	x := &exec{ctx: ctx, store: s.store, app: app, user: user, usage: usage, now: s.now(), newID: s.newID}
	out, w, err := x.run(c)
	if err != nil || w == nil {
		return out, w, err
	}
	return out, w, x.settle(w)
}

// answer turns a command's error into the tool's answer, or returns it
// when it is not the tool's (the store's failures).
func answer(err error) (*Result, error) {
	var te *toolError
	if errors.As(err, &te) {
		return &Result{Output: te.msg, IsError: true}, nil
	}
	var pe *PathError
	if errors.As(err, &pe) {
		return &Result{Output: pe.Error(), IsError: true}, nil
	}
	return nil, err
}

// ListRequest asks for a page of a user's files.
type ListRequest struct {
	App, User string
	// Path, when set, is a path of the tool (a directory, or one file):
	// the files at or below it. Default Root.
	Path        string
	ShowDeleted bool
	PageSize    int32
	PageToken   string
}

// ListFiles returns a page of a user's files in path order, without their
// content, and the next page's token ("" at the end).
func (s *Service) ListFiles(ctx context.Context, r ListRequest) ([]*File, string, error) {
	if err := validateUser(r.App, r.User); err != nil {
		return nil, "", err
	}
	dir := Root
	if r.Path != "" {
		var err error
		if dir, err = CleanPath(r.Path); err != nil {
			return nil, "", fault.InvalidField("path", "%s", strings.TrimPrefix(err.Error(), "Error: "))
		}
	}
	size, err := aip.PageSize("page_size", r.PageSize)
	if err != nil {
		return nil, "", err
	}
	query := aip.QueryDigest("memoryfiles", r.App, r.User, dir, strconv.FormatBool(r.ShowDeleted))
	tok, err := aip.DecodePageToken(r.PageToken, query)
	if err != nil {
		return nil, "", err
	}
	// The cursor is the last file's path and id, apart by a NUL (which no
	// path holds).
	var afterPath, afterID string
	if tok.ID != "" {
		afterPath, afterID, _ = strings.Cut(tok.ID, "\x00")
	}
	list, err := s.store.ListFiles(ctx, ListQuery{App: r.App, User: r.User, Dir: dir, ShowDeleted: r.ShowDeleted, AfterPath: afterPath, AfterID: afterID, Limit: size + 1})
	if err != nil {
		return nil, "", err
	}
	page, next := aip.Page(list, size, query, func(f *File) aip.PageToken { return aip.PageToken{ID: f.Path + "\x00" + f.ID} })
	return page, next, nil
}

// GetFile returns a user's file by id, with its content; a deleted file
// too (Deleted set).
func (s *Service) GetFile(ctx context.Context, app, user, id string) (*File, error) {
	if err := validateUser(app, user); err != nil {
		return nil, err
	}
	if err := resource.ValidateID("memory file id", id, resource.MemoryFileIDChars); err != nil {
		return nil, err
	}
	f, err := s.store.GetFile(ctx, app, user, id)
	if fault.Is(err, fault.NotFound) {
		return nil, fault.NotFoundf("memory file %s not found", resource.MemoryFileName(app, user, id))
	}
	return f, err
}

// ListRevisions returns a page of a file's revisions, newest first, and
// the next page's token. A deleted file's too.
func (s *Service) ListRevisions(ctx context.Context, app, user, id string, pageSize int32, pageToken string) ([]*Revision, string, error) {
	if _, err := s.GetFile(ctx, app, user, id); err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", pageSize)
	if err != nil {
		return nil, "", err
	}
	query := aip.QueryDigest("memoryfilerevisions", app, user, id)
	tok, err := aip.DecodePageToken(pageToken, query)
	if err != nil {
		return nil, "", err
	}
	list, err := s.store.ListRevisions(ctx, app, user, id, tok.Seq, size+1)
	if err != nil {
		return nil, "", err
	}
	page, next := aip.Page(list, size, query, func(r *Revision) aip.PageToken { return aip.PageToken{Seq: r.Number} })
	return page, next, nil
}

// EraseUser removes every memory file of a user, deleted ones too, with
// their revisions, for a data-subject request (see Store.DeleteUser), and
// returns how many files it removed. Calling it again finishes an erasure
// that stopped.
func (s *Service) EraseUser(ctx context.Context, app, user string) (int, error) {
	if err := validateUser(app, user); err != nil {
		return 0, err
	}
	return s.store.DeleteUser(ctx, app, user)
}
