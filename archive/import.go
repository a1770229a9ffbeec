package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// ImportOptions tune Import.
type ImportOptions struct {
	// Embedder is the embedder the target runs: memories whose vectors
	// are of another are embedded again with it once the records are in.
	// Default: the offline embedder.
	Embedder model.Embedder
	// Now decides expiry. Default: time.Now().
	Now time.Time
	// Target, when it names an app (and maybe a user), is what the
	// caller means to import: an archive whose header selects anything
	// else (another app or user, the whole installation, the whole app
	// for a user) is refused before anything is read past the header.
	// The zero Target takes the archive's own selection.
	Target Selection
}

// Report is what an import did.
type Report struct {
	// Header is the archive's header.
	Header Header
	// Read counts the records read, by kind; Written those the target did
	// not hold yet (or held in another state), which the import wrote.
	// The others were there already.
	Read, Written Counts
	// Expired counts the sessions skipped, with their events, because they
	// expired after the export.
	Expired int64
	// Reembedded counts the memories embedded again with the target's
	// embedder.
	Reembedded int
}

// The batches an import writes.
const (
	eventBatch      = 500
	eventBatchBytes = 4 << 20
	revisionBatch   = 100
	watermarkBatch  = 100
)

// Import writes the records of the archive src to the stores as they are
// (see the package documentation) and returns what it did. It reads src
// twice: first it checks every record as the API would take it, without
// writing (a refused record, a sequence gap or a duplicate stops it there
// and the stores are as they were); then it seeks back to the start and
// writes, batch by batch. It stops at the first record the target refuses
// (a conflict), naming it; what it wrote before stays, and running it
// again resumes. Memories whose vectors come from another embedder than
// opts.Embedder are then embedded again.
func Import(ctx context.Context, st Stores, src io.ReadSeeker, opts ImportOptions) (*Report, error) {
	if opts.Embedder == nil {
		opts.Embedder = model.Offline{}
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	rep := &Report{Read: Counts{}, Written: Counts{}}
	ts, ms, err := transferers(st)
	if err != nil {
		return rep, err
	}
	if err := scan(src, opts.Target, rep, "nothing was written", func(*Record) error { return nil }); err != nil {
		return rep, err
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return rep, fmt.Errorf("reading the archive again to write it: %w", err)
	}
	rep.Read = Counts{}
	im := &importer{st: st, transfer: ts, mtransfer: ms, opts: opts, rep: rep}
	changed := "the archive changed while it was imported; what was written before it stays"
	if err := scan(src, opts.Target, rep, changed, func(rec *Record) error { return im.record(ctx, rec) }); err != nil {
		return rep, err
	}
	if err := im.flush(ctx); err != nil {
		return im.rep, err
	}
	if im.stale {
		// The service's re-embedding pass: every visible memory whose
		// vector is not of the embedder, 100 at a time.
		svc := memorybank.NewService(st.Memories, memorybank.Config{Embedder: opts.Embedder, Now: func() time.Time { return opts.Now },
			Logger: slog.New(slog.DiscardHandler)})
		n, err := svc.Reembed(ctx)
		im.rep.Reembedded = n
		if err != nil {
			return im.rep, fmt.Errorf("embedding the imported memories with %s: %w", opts.Embedder.Name(), err)
		}
	}
	return im.rep, nil
}

// scan reads an archive from src, checks its header against target and
// each of its records (checker), counting them in rep.Read, and hands each
// to write, naming the record in write's errors.
func scan(src io.Reader, target Selection, rep *Report, refused string, write func(*Record) error) error {
	r, err := NewReader(src)
	if err != nil {
		return err
	}
	defer r.Close()
	h := r.Header()
	rep.Header = h
	if target.App != "" && (h.App != target.App || h.User != target.User) {
		return fmt.Errorf("the archive holds %s (its header says so), not %s: nothing was written (import it without naming a target to take the archive's own selection)", describeSelection(Selection{App: h.App, User: h.User}), describeSelection(target))
	}
	c := newChecker(h)
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		rep.Read[rec.Kind]++
		if err := c.check(rec); err != nil {
			return fmt.Errorf("record %d of the archive (%s) is refused: %w; %s", r.line, rec.Kind, err, refused)
		}
		if err := write(rec); err != nil {
			return fmt.Errorf("importing record %d of the archive (%s): %w", r.line, rec.Kind, err)
		}
	}
	if err := c.finish(); err != nil {
		return fmt.Errorf("the archive's last records are refused: %w; %s", err, refused)
	}
	return nil
}

// describeSelection names a selection for messages.
func describeSelection(s Selection) string {
	switch {
	case s.User != "":
		return fmt.Sprintf("user %s of app %s", s.User, s.App)
	case s.App != "":
		return "app " + s.App
	}
	return "the whole installation"
}

// importer is an import under way: the batches not written yet.
type importer struct {
	st        Stores
	transfer  sessiondriver.Transferer
	mtransfer memorydriver.Transferer
	opts      ImportOptions
	rep       *Report

	// The session whose events follow, and its events not written yet.
	session    *sessiontype.Session
	skipping   bool // the session expired: its events are skipped
	events     []*sessiontype.Event
	eventBytes int

	// The memory whose revisions follow, whether it was written, and its
	// revisions not written yet.
	memory    *memorytype.Memory
	memoryIn  bool
	revisions []*memorytype.Revision

	// The memory file whose revisions follow, and its revisions (a file
	// keeps MaxRevisions of them: they are written with it).
	file     *memoryfiles.File
	fileRevs []*memoryfiles.Revision

	// The block whose revisions follow, and its revisions.
	block     *blocks.Block
	blockRevs []*blocks.Revision

	// Watermarks not written yet, of one app.
	marksApp string
	marks    map[string]int64

	// Whether a memory's vector is not of the target's embedder.
	stale bool
}

// record handles one record.
func (im *importer) record(ctx context.Context, rec *Record) error {
	switch rec.Kind {
	case KindEvent:
		return im.event(ctx, rec)
	case KindRevision:
		return im.revision(ctx, rec.Revision)
	case KindWatermark:
		return im.watermark(ctx, rec.Watermark)
	case KindFileRevision:
		im.fileRevs = append(im.fileRevs, rec.FileRevision)
		return nil
	case KindBlockRevision:
		im.blockRevs = append(im.blockRevs, rec.BlockRevision)
		return nil
	}
	if err := im.flush(ctx); err != nil {
		return err
	}
	im.session, im.memory, im.file, im.block = nil, nil, nil, nil
	switch rec.Kind {
	case KindAppState, KindUserState:
		wrote, err := im.transfer.ImportState(ctx, rec.State)
		return im.wrote(rec.Kind, wrote, err)
	case KindSession:
		s := rec.Session
		im.session, im.skipping = s, false
		if s.Expired(im.opts.Now) {
			im.skipping = true
			im.rep.Expired++
			return nil
		}
		wrote, err := im.transfer.ImportSession(ctx, s, im.opts.Now)
		return im.wrote(rec.Kind, wrote, err)
	case KindSessionDeleted:
		err := im.st.Sessions.DeleteSession(ctx, rec.Of, im.opts.Now)
		if fault.Is(err, fault.NotFound) {
			return nil
		}
		return im.wrote(rec.Kind, true, err)
	case KindConfig:
		return im.config(ctx, rec.Config)
	case KindMemory:
		im.memory, im.memoryIn = rec.Memory, false
		if m := rec.Memory; !m.Deleted && m.EmbeddingModel != im.opts.Embedder.Name() {
			im.stale = true
		}
		return nil
	case KindMemoryFile:
		if im.st.Files == nil {
			return fmt.Errorf("memory file %s: this program keeps no memory files", rec.File.Name())
		}
		im.file = rec.File
		return nil
	case KindBlock:
		if im.st.Blocks == nil {
			return fmt.Errorf("block %s: this program keeps no blocks", rec.Block.Name())
		}
		im.block = rec.Block
		return nil
	case KindOperation:
		_, err := im.st.Operations.GetOperation(ctx, rec.Operation.App, rec.Operation.ID)
		switch {
		case err == nil:
			return nil // the target's, which may have run on since
		case !fault.Is(err, fault.NotFound):
			return err
		}
		err = im.st.Operations.CreateOperation(ctx, rec.Operation)
		if fault.Is(err, fault.AlreadyExists) {
			return nil
		}
		return im.wrote(rec.Kind, true, err)
	}
	return fmt.Errorf("a %s record cannot be imported", rec.Kind)
}

// add counts n records of a kind (none: the kind stays absent).
func (c Counts) add(kind Kind, n int) {
	if n > 0 {
		c[kind] += int64(n)
	}
}

func (im *importer) wrote(kind Kind, wrote bool, err error) error {
	if err == nil && wrote {
		im.rep.Written[kind]++
	}
	return err
}

// event queues an event of the current session.
func (im *importer) event(ctx context.Context, rec *Record) error {
	if im.skipping {
		return nil
	}
	im.events = append(im.events, rec.Event)
	im.eventBytes += rec.Size
	if len(im.events) >= eventBatch || im.eventBytes >= eventBatchBytes {
		return im.flushEvents(ctx)
	}
	return nil
}

// revision queues a revision of the current memory.
func (im *importer) revision(ctx context.Context, r *memorytype.Revision) error {
	im.revisions = append(im.revisions, r)
	if len(im.revisions) >= revisionBatch {
		return im.flushMemory(ctx)
	}
	return nil
}

// watermark queues a watermark; those of one app are written together.
func (im *importer) watermark(ctx context.Context, w *memorydriver.Watermark) error {
	if err := im.flushEvents(ctx); err != nil {
		return err
	}
	if err := im.flushMemory(ctx); err != nil {
		return err
	}
	if err := im.flushFile(ctx); err != nil {
		return err
	}
	if im.marksApp != w.App || len(im.marks) >= watermarkBatch {
		if err := im.flushMarks(ctx); err != nil {
			return err
		}
	}
	cur, err := im.st.Memories.Watermark(ctx, w.App, w.Session)
	if err != nil || cur >= w.Sequence {
		return err
	}
	if im.marks == nil {
		im.marks = map[string]int64{}
	}
	im.marksApp = w.App
	im.marks[w.Session] = w.Sequence
	return nil
}

// config writes an app's configuration unless the target's is the same,
// and refuses to replace one changed after the archive's.
func (im *importer) config(ctx context.Context, c *appconfig.Config) error {
	cur, err := im.st.Memories.GetConfig(ctx, c.App)
	if err != nil {
		return err
	}
	if cur.UpdateTime.After(c.UpdateTime) {
		return fault.New(fault.FailedPrecondition, "the memory bank configuration of app %s moved on in this store (updated %v) past the archive's (updated %v)", c.App, cur.UpdateTime, c.UpdateTime)
	}
	a, err := record.MarshalConfig(cur)
	if err != nil {
		return err
	}
	b, err := record.MarshalConfig(c)
	if err != nil {
		return err
	}
	if bytes.Equal(a, b) {
		return nil
	}
	return im.wrote(KindConfig, true, im.st.Memories.PutConfig(ctx, c))
}

// flush writes every batch.
func (im *importer) flush(ctx context.Context) error {
	return errors.Join(im.flushEvents(ctx), im.flushMemory(ctx), im.flushFile(ctx), im.flushBlock(ctx), im.flushMarks(ctx))
}

// flushBlock writes the current block with its revisions.
func (im *importer) flushBlock(ctx context.Context) error {
	if im.block == nil {
		return nil
	}
	b := im.block
	wrote, n, err := im.st.Blocks.Import(ctx, b, im.blockRevs)
	im.block, im.blockRevs = nil, nil
	if err != nil {
		return fmt.Errorf("block %s: %w", b.Name(), err)
	}
	if wrote {
		im.rep.Written[KindBlock]++
	}
	im.rep.Written.add(KindBlockRevision, n)
	return nil
}

// flushFile writes the current memory file with its revisions.
func (im *importer) flushFile(ctx context.Context) error {
	if im.file == nil {
		return nil
	}
	f := im.file
	wrote, n, err := im.st.Files.ImportFile(ctx, f, im.fileRevs)
	im.file, im.fileRevs = nil, nil
	if err != nil {
		return fmt.Errorf("memory file %s: %w", f.Name(), err)
	}
	if wrote {
		im.rep.Written[KindMemoryFile]++
	}
	im.rep.Written.add(KindFileRevision, n)
	return nil
}

func (im *importer) flushEvents(ctx context.Context) error {
	if len(im.events) == 0 {
		return nil
	}
	n, err := im.transfer.ImportEvents(ctx, im.session.Key, im.events, im.opts.Now)
	im.rep.Written.add(KindEvent, n)
	im.events, im.eventBytes = im.events[:0], 0
	if err != nil {
		return fmt.Errorf("events of %s: %w", im.session.Name(), err)
	}
	return nil
}

// flushMemory writes the current memory, if it was not written yet, and
// its revisions read since.
func (im *importer) flushMemory(ctx context.Context) error {
	if im.memory == nil || im.memoryIn && len(im.revisions) == 0 {
		return nil
	}
	wrote, n, err := im.mtransfer.ImportMemory(ctx, im.memory, im.revisions)
	if err != nil {
		return fmt.Errorf("memory %s: %w", im.memory.Name(), err)
	}
	if wrote && !im.memoryIn {
		im.rep.Written[KindMemory]++
	}
	im.rep.Written.add(KindRevision, n)
	im.memoryIn, im.revisions = true, im.revisions[:0]
	return nil
}

func (im *importer) flushMarks(ctx context.Context) error {
	if len(im.marks) == 0 {
		return nil
	}
	err := im.st.Memories.Write(ctx, &memorydriver.Write{App: im.marksApp, Now: im.opts.Now, Watermarks: im.marks})
	if err != nil {
		return fmt.Errorf("watermarks of app %s: %w", im.marksApp, err)
	}
	im.rep.Written.add(KindWatermark, len(im.marks))
	im.marks = nil
	return nil
}

// within refuses a record outside the archive's selection (its header's
// app and user): an archive of one app, or of one user, writes nothing
// of another, however its records were edited.
func within(h Header, rec *Record) error {
	if h.App == "" {
		return nil
	}
	app, user, userless := "", "", false // userless: a record of the whole app
	switch rec.Kind {
	case KindAppState, KindUserState:
		app, user, userless = rec.State.Ref.App, rec.State.Ref.User, rec.State.Ref.User == ""
	case KindSession:
		app, user = rec.Session.App, rec.Session.User
	case KindEvent, KindSessionDeleted:
		app, user = rec.Of.App, rec.Of.User
	case KindConfig:
		app, userless = rec.Config.App, true
	case KindMemory:
		app, user = rec.Memory.App, rec.Memory.Scope.User()
		userless = user == ""
	case KindRevision:
		app, user = rec.Revision.App, h.User // follows its memory, checked with it
	case KindWatermark:
		var err error
		if app, user, _, err = resource.ParseSession("session", rec.Watermark.Session); err != nil {
			return fmt.Errorf("names no session: %w", err)
		}
	case KindOperation:
		app, user = rec.Operation.App, h.User
		if h.User != "" && !memorybank.Concerns(rec.Operation, h.User) {
			user = "another user"
		}
	case KindMemoryFile:
		app, user = rec.File.App, rec.File.User
	case KindFileRevision:
		app, user = rec.FileRevision.App, rec.FileRevision.User
	case KindBlock:
		app, user = rec.Block.App, rec.Block.User
		userless = user == ""
	case KindBlockRevision:
		app, user = rec.BlockRevision.App, rec.BlockRevision.User
		userless = user == ""
	default:
		return nil
	}
	switch {
	case app != h.App:
		return fmt.Errorf("is of app %q, but the archive's header says it holds app %q only", app, h.App)
	case h.User != "" && userless:
		return fmt.Errorf("is of the whole app %q, but the archive's header says it holds user %q only", app, h.User)
	case h.User != "" && user != h.User:
		return fmt.Errorf("is of user %q, but the archive's header says it holds user %q only", user, h.User)
	}
	return nil
}
