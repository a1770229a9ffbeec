package archive

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Stores are the stores an export reads or an import writes: those of
// one installation. Files and Blocks may be nil (a program that keeps no
// memory files, or no blocks): an export then holds none, and an import
// of an archive that has some fails at the first.
//
// The session store must implement sessiondriver.Transferer as well, and
// the memory store memorydriver.Transferer: Export and Import fail with
// fault.Unimplemented otherwise. Operations is the jobs store the memory
// bank's operations are kept in: the memory store itself (see package
// memorydriver).
type Stores struct {
	Sessions   sessiondriver.Store
	Memories   memorydriver.Store
	Operations jobs.Store
	Files      memoryfiles.Store
	Blocks     blocks.Store
}

// Selection chooses what an export copies: the whole installation (App
// empty), one app, or one user of an app.
type Selection struct {
	App, User string
}

// ParseSelection parses what a command line names: "" (everything),
// "apps/A" or "apps/A/users/U".
func ParseSelection(name string) (Selection, error) {
	if name == "" {
		return Selection{}, nil
	}
	if v, ok := resource.App.Match(name); ok {
		return Selection{App: v[0]}, resource.ValidateID("app id", v[0], resource.AppIDChars)
	}
	app, user, err := resource.ParseUser("selection", name)
	if err != nil {
		return Selection{}, fault.Invalidf("%q is neither an app (apps/{app}) nor a user (apps/{app}/users/{user})", name)
	}
	return Selection{App: app, User: user}, nil
}

// The page sizes of an export's reads.
const (
	appPage     = 100
	sessionPage = 100
	eventPage   = 1000
	// eventPageBytes bounds a page of events by their stored size (a page
	// ends with the event that passes it), so that large events keep an
	// export's memory flat too.
	eventPageBytes = 4 << 20
	memoryPage     = 100
	revisionPage   = 100
	watermarkPage  = 1000
	operationPage  = 100
	userPage       = 100
	// filePage is how many memory files (with their content, 100 KiB at
	// most each) a read returns.
	filePage = 50
)

// Export writes what sel selects from the stores to w, in the order the
// format gives, reading page by page so that its memory stays flat however
// much the stores hold. now decides what has expired. Export does not
// close w.
func Export(ctx context.Context, st Stores, w *Writer, sel Selection, now time.Time) error {
	ts, ms, err := transferers(st)
	if err != nil {
		return err
	}
	e := &exporter{st: st, transfer: ts, mtransfer: ms, w: w, sel: sel, now: now}
	if sel.App != "" {
		return e.app(ctx, sel.App)
	}
	apps, err := e.apps(ctx)
	if err != nil {
		return err
	}
	for _, app := range apps {
		if err := e.app(ctx, app); err != nil {
			return err
		}
	}
	return nil
}

type exporter struct {
	st        Stores
	transfer  sessiondriver.Transferer
	mtransfer memorydriver.Transferer
	w         *Writer
	sel       Selection
	now       time.Time
}

// transferers returns the session and memory stores' export and import
// primitives.
func transferers(st Stores) (sessiondriver.Transferer, memorydriver.Transferer, error) {
	ts, ok := st.Sessions.(sessiondriver.Transferer)
	if !ok {
		return nil, nil, fault.New(fault.Unimplemented, "the session store %T cannot be exported or imported: it does not implement sessiondriver.Transferer", st.Sessions)
	}
	ms, ok := st.Memories.(memorydriver.Transferer)
	if !ok {
		return nil, nil, fault.New(fault.Unimplemented, "the memory store %T cannot be exported or imported: it does not implement memorydriver.Transferer", st.Memories)
	}
	return ts, ms, nil
}

// apps returns the apps any of the stores holds, in id order. Apps are an
// installation's tenants: few, whatever the data they hold.
func (e *exporter) apps(ctx context.Context) ([]string, error) {
	type lister struct {
		what string
		apps func(ctx context.Context, after string, limit int) ([]string, error)
	}
	lists := []lister{{"session store", e.transfer.Apps}, {"memory bank", e.mtransfer.Apps}}
	if e.st.Files != nil {
		lists = append(lists, lister{"memory files", e.st.Files.Apps})
	}
	if e.st.Blocks != nil {
		lists = append(lists, lister{"blocks", e.st.Blocks.Apps})
	}
	var all []string
	for _, list := range lists {
		after := ""
		for {
			page, err := list.apps(ctx, after, appPage)
			if err != nil {
				return nil, fmt.Errorf("listing the apps of the %s: %w", list.what, err)
			}
			all = append(all, page...)
			if len(page) < appPage {
				break
			}
			after = page[len(page)-1]
		}
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// app exports one app, or the selected user of it.
func (e *exporter) app(ctx context.Context, app string) error {
	steps := []func(context.Context, string) error{e.states, e.sessions, e.config, e.memories, e.files, e.blocks, e.watermarks, e.operations}
	for _, step := range steps {
		if err := step(ctx, app); err != nil {
			return fmt.Errorf("exporting app %s: %w", app, err)
		}
	}
	return nil
}

// states writes the app's state and its users' (the selected user's).
func (e *exporter) states(ctx context.Context, app string) error {
	if e.sel.User != "" {
		st, t, err := e.st.Sessions.GetState(ctx, sessiontype.StateRef{App: app, User: e.sel.User})
		if err != nil || t.IsZero() {
			return err
		}
		return e.w.State(&sessiontype.SharedState{Ref: sessiontype.StateRef{App: app, User: e.sel.User}, State: st, UpdateTime: t})
	}
	st, t, err := e.st.Sessions.GetState(ctx, sessiontype.StateRef{App: app})
	if err != nil {
		return err
	}
	if !t.IsZero() {
		if err := e.w.State(&sessiontype.SharedState{Ref: sessiontype.StateRef{App: app}, State: st, UpdateTime: t}); err != nil {
			return err
		}
	}
	after := ""
	for {
		states, err := e.transfer.ScanUserStates(ctx, app, after, sessionPage)
		if err != nil {
			return err
		}
		for _, s := range states {
			if err := e.w.State(s); err != nil {
				return err
			}
		}
		if len(states) < sessionPage {
			return nil
		}
		after = states[len(states)-1].Ref.User
	}
}

// sessions writes the sessions of the app (of the selected user), each
// followed by its events.
func (e *exporter) sessions(ctx context.Context, app string) error {
	after := ""
	for {
		page, err := e.transfer.ScanSessions(ctx, sessiondriver.ScanSessionsParams{App: app, User: e.sel.User, Now: e.now, AfterID: after, Limit: sessionPage})
		if err != nil {
			return err
		}
		for _, s := range page {
			if err := e.session(ctx, s); err != nil {
				return fmt.Errorf("session %s: %w", s.Name(), err)
			}
		}
		if len(page) < sessionPage {
			return nil
		}
		after = page[len(page)-1].ID
	}
}

// session writes a session and its events 1 to LastSequence, which are
// never changed once stored, so they agree with the session's state
// whatever is appended meanwhile. A session deleted meanwhile is followed
// by a session_deleted record.
func (e *exporter) session(ctx context.Context, s *sessiontype.Session) error {
	if err := e.w.Session(s); err != nil {
		return err
	}
	var after int64
	for after < s.LastSequence {
		events, err := e.st.Sessions.ListEvents(ctx, s.Key, sessiondriver.EventQuery{Now: e.now, AfterSeq: after, BeforeSeq: s.LastSequence + 1, Limit: eventPage, MaxBytes: eventPageBytes})
		if fault.Is(err, fault.NotFound) {
			return e.w.SessionDeleted(s.Key)
		}
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		for _, ev := range events {
			if err := e.w.Event(s.Key, ev); err != nil {
				return err
			}
		}
		after = events[len(events)-1].Sequence
	}
	return nil
}

// config writes the app's memory bank configuration, if it has one.
func (e *exporter) config(ctx context.Context, app string) error {
	if e.sel.User != "" {
		return nil
	}
	c, err := e.st.Memories.GetConfig(ctx, app)
	if err != nil || c.UpdateTime.IsZero() {
		return err
	}
	return e.w.Config(c)
}

// memories writes the app's memories (the selected user's), each followed
// by its revisions.
func (e *exporter) memories(ctx context.Context, app string) error {
	after := ""
	for {
		page, err := e.mtransfer.ScanMemories(ctx, memorydriver.ScanQuery{App: app, User: e.sel.User, AfterID: after, Limit: memoryPage})
		if err != nil {
			return err
		}
		for _, m := range page {
			if err := e.w.Memory(m); err != nil {
				return err
			}
			if err := e.revisions(ctx, m); err != nil {
				return fmt.Errorf("memory %s: %w", m.Name(), err)
			}
		}
		if len(page) < memoryPage {
			return nil
		}
		after = page[len(page)-1].ID
	}
}

// revisions writes a memory's revisions, newest first.
func (e *exporter) revisions(ctx context.Context, m *memorytype.Memory) error {
	var before int64
	for {
		revs, err := e.st.Memories.ListRevisions(ctx, m.App, m.ID, before, revisionPage, e.now)
		if err != nil {
			return err
		}
		for _, r := range revs {
			if err := e.w.Revision(r); err != nil {
				return err
			}
		}
		if len(revs) < revisionPage {
			return nil
		}
		before = revs[len(revs)-1].Number
	}
}

// files writes the memory files of the app's users (of the selected user),
// user by user in id order, each file (deleted ones too) in path order
// followed by its revisions, newest first.
func (e *exporter) files(ctx context.Context, app string) error {
	if e.st.Files == nil {
		return nil
	}
	if e.sel.User != "" {
		return e.userFiles(ctx, app, e.sel.User)
	}
	after := ""
	for {
		users, err := e.st.Files.Users(ctx, app, after, userPage)
		if err != nil {
			return err
		}
		for _, u := range users {
			if err := e.userFiles(ctx, app, u); err != nil {
				return err
			}
		}
		if len(users) < userPage {
			return nil
		}
		after = users[len(users)-1]
	}
}

// userFiles writes one user's memory files and their revisions.
func (e *exporter) userFiles(ctx context.Context, app, user string) error {
	q := memoryfiles.ListQuery{App: app, User: user, Dir: memoryfiles.Root, ShowDeleted: true, Content: true, Limit: filePage}
	for {
		page, err := e.st.Files.ListFiles(ctx, q)
		if err != nil {
			return err
		}
		for _, f := range page {
			if err := e.w.MemoryFile(f); err != nil {
				return err
			}
			revs, err := e.st.Files.ListRevisions(ctx, app, user, f.ID, 0, memoryfiles.MaxRevisions)
			if err != nil {
				return fmt.Errorf("memory file %s: %w", f.Name(), err)
			}
			for _, r := range revs {
				if err := e.w.MemoryFileRevision(r); err != nil {
					return err
				}
			}
		}
		if len(page) < q.Limit {
			return nil
		}
		q.AfterPath, q.AfterID = page[len(page)-1].Path, page[len(page)-1].ID
	}
}

// blocks writes the app's blocks: its shared blocks (unless a user is
// selected), then its users' (the selected user's), user by user in id
// order, each block in label order followed by its revisions, newest
// first.
func (e *exporter) blocks(ctx context.Context, app string) error {
	if e.st.Blocks == nil {
		return nil
	}
	if e.sel.User != "" {
		return e.ownerBlocks(ctx, app, e.sel.User)
	}
	if err := e.ownerBlocks(ctx, app, ""); err != nil {
		return err
	}
	after := ""
	for {
		users, err := e.st.Blocks.Users(ctx, app, after, userPage)
		if err != nil {
			return err
		}
		for _, u := range users {
			if err := e.ownerBlocks(ctx, app, u); err != nil {
				return err
			}
		}
		if len(users) < userPage {
			return nil
		}
		after = users[len(users)-1]
	}
}

// ownerBlocks writes the blocks of a user (user empty: the app's shared
// blocks), at most blocks.MaxBlocks, with their revisions.
func (e *exporter) ownerBlocks(ctx context.Context, app, user string) error {
	list, err := e.st.Blocks.List(ctx, app, user, "", blocks.MaxBlocks)
	if err != nil {
		return err
	}
	for _, b := range list {
		if err := e.w.Block(b); err != nil {
			return err
		}
		revs, err := e.st.Blocks.ListRevisions(ctx, b.Key, 0, blocks.MaxRevisions)
		if err != nil {
			return fmt.Errorf("block %s: %w", b.Name(), err)
		}
		for _, r := range revs {
			if err := e.w.BlockRevision(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// watermarks writes the app's generation watermarks (of the selected
// user's sessions).
func (e *exporter) watermarks(ctx context.Context, app string) error {
	prefix := ""
	if e.sel.User != "" {
		prefix = resource.UserName(app, e.sel.User) + "/sessions/"
	}
	after := ""
	for {
		page, err := e.mtransfer.ScanWatermarks(ctx, app, prefix, after, watermarkPage)
		if err != nil {
			return err
		}
		for _, wm := range page {
			if err := e.w.Watermark(wm); err != nil {
				return err
			}
		}
		if len(page) < watermarkPage {
			return nil
		}
		after = page[len(page)-1].Session
	}
}

// operations writes the app's operations (the selected user's), newest
// first.
func (e *exporter) operations(ctx context.Context, app string) error {
	q := jobs.Query{App: app, Limit: operationPage}
	for {
		page, err := e.st.Operations.ListOperations(ctx, q)
		if err != nil {
			return err
		}
		for _, op := range page {
			if e.sel.User != "" && !memorybank.Concerns(op, e.sel.User) {
				continue
			}
			if err := e.w.Operation(op); err != nil {
				return err
			}
		}
		if len(page) < operationPage {
			return nil
		}
		last := page[len(page)-1]
		q.AfterCreate, q.AfterID = last.CreateTime, last.ID
	}
}
