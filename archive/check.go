package archive

import (
	"errors"
	"fmt"

	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// checker checks an archive's records as an import reads them, before
// any store is asked: each record within the header's selection
// (within), each session and event as the API would take it
// (sessions.ValidateImported), a session's events following it with
// every sequence from 1 to its last_sequence once, no session, memory
// or memory file twice, revisions following their memory or memory
// file, and each user's memory files within the memory tool's limits
// (fileChecker). Import runs it over the whole archive before writing
// anything, then again as it writes.
type checker struct {
	h Header

	session *sessiontype.Session // the session whose events follow
	lastSeq int64                // the sequence of its last event read

	memApp, memID string   // the memory whose revisions follow
	file          fileName // the memory file whose revisions follow

	// What was seen: sessions by app and id (an id is unique in its app),
	// memories and memory files by name.
	sessions map[appID]bool
	memories map[string]bool
	files    map[fileName]bool

	limits *fileChecker  // the memory files' limits
	blocks *blockChecker // the blocks
}

type appID struct{ app, id string }

type fileName struct{ app, user, id string }

func newChecker(h Header) *checker {
	return &checker{h: h, sessions: map[appID]bool{}, memories: map[string]bool{}, files: map[fileName]bool{}, limits: newFileChecker(), blocks: newBlockChecker()}
}

// check checks one record, given those before it.
func (c *checker) check(rec *Record) error {
	if err := within(c.h, rec); err != nil {
		return err
	}
	switch rec.Kind {
	case KindEvent:
		return c.event(rec)
	case KindRevision:
		if r := rec.Revision; c.memID == "" || c.memApp != r.App || c.memID != r.MemoryID {
			return fmt.Errorf("revision %s does not follow its memory's record", r.Name())
		}
		return nil
	case KindFileRevision:
		if r := rec.FileRevision; c.file != (fileName{r.App, r.User, r.FileID}) {
			return fmt.Errorf("revision %s does not follow its memory file's record", r.Name())
		}
		return c.limits.revision(rec.FileRevision)
	case KindBlockRevision:
		return c.blocks.check(rec)
	}
	if err := c.blocks.check(rec); err != nil {
		return err
	}
	// Any other record ends the session, memory or memory file before,
	// and any but a memory file the user's memory files.
	if err := c.endSession(rec); err != nil {
		return err
	}
	if rec.Kind != KindMemoryFile {
		if err := c.limits.end(); err != nil {
			return err
		}
	}
	c.memApp, c.memID, c.file = "", "", fileName{}
	switch rec.Kind {
	case KindSession:
		s := rec.Session
		if err := sessions.ValidateImported(s, nil); err != nil {
			return err
		}
		k := appID{s.App, s.ID}
		if c.sessions[k] {
			return fmt.Errorf("session %s appears twice in the archive (session id %q of app %q): the archive was edited or two were joined; nothing was merged", s.Name(), s.ID, s.App)
		}
		c.sessions[k] = true
		c.session, c.lastSeq = s, 0
	case KindMemory:
		m := rec.Memory
		if c.memories[m.Name()] {
			return fmt.Errorf("memory %s appears twice in the archive; nothing was merged", m.Name())
		}
		c.memories[m.Name()] = true
		c.memApp, c.memID = m.App, m.ID
	case KindMemoryFile:
		f := rec.File
		n := fileName{f.App, f.User, f.ID}
		if c.files[n] {
			return fmt.Errorf("memory file %s appears twice in the archive; nothing was merged", f.Name())
		}
		c.files[n] = true
		c.file = n
		return c.limits.memoryFile(f)
	}
	return nil
}

// finish checks what the end of the archive ends: the last session's
// events and the last user's memory files.
func (c *checker) finish() error {
	return errors.Join(c.endSession(nil), c.limits.end())
}

// event checks an event of the current session: the sequence after the
// last one read, within the session's last_sequence, and the event as
// the API would take it.
func (c *checker) event(rec *Record) error {
	s, e := c.session, rec.Event
	if s == nil || s.Key != rec.Of {
		return fmt.Errorf("an event of %s that does not follow its session's record", rec.Of.Name())
	}
	switch want := c.lastSeq + 1; {
	case e.Sequence < want:
		return fmt.Errorf("session %s: event %q has sequence %d, which an event before it has already or passed (duplicated or out of order)", s.Name(), e.ID, e.Sequence)
	case e.Sequence > s.LastSequence:
		return fmt.Errorf("session %s: event %q has sequence %d, beyond the session's last_sequence %d", s.Name(), e.ID, e.Sequence, s.LastSequence)
	case e.Sequence > want:
		return fmt.Errorf("session %s: sequence %d is missing (event %q has sequence %d after %d); a session needs every sequence from 1 to its last_sequence, or reading and forking it fail", s.Name(), want, e.ID, e.Sequence, c.lastSeq)
	}
	c.lastSeq = e.Sequence
	return sessions.ValidateImported(nil, []*sessiontype.Event{e})
}

// endSession checks that the current session's events reached its
// last_sequence before next (nil: the end of the archive), unless next
// says the session was deleted while it was exported.
func (c *checker) endSession(next *Record) error {
	s := c.session
	c.session = nil
	if s == nil || c.lastSeq == s.LastSequence {
		return nil
	}
	if next != nil && next.Kind == KindSessionDeleted && next.Of == s.Key {
		return nil
	}
	return fmt.Errorf("session %s: sequence %d is missing (its events stop at %d; its last_sequence is %d); a session needs every sequence from 1 to its last_sequence, or reading and forking it fail", s.Name(), c.lastSeq+1, c.lastSeq, s.LastSequence)
}
