package archive

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Reader reads an archive record by record.
type Reader struct {
	version int // the archive's format version
	sc      *bufio.Scanner
	gz      *gzip.Reader
	header  Header
	line    int
	counts  Counts
	done    bool
}

// NewReader reads the header of an archive. It refuses what is not a kioku
// archive and a format version other than Version.
func NewReader(r io.Reader) (*Reader, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a kioku archive (a gzip-compressed stream): %w", err)
	}
	sc := bufio.NewScanner(gz)
	sc.Buffer(make([]byte, 0, 256<<10), MaxLine+1)
	rd := &Reader{sc: sc, gz: gz, counts: Counts{}}
	line, err := rd.next()
	if err == io.EOF {
		return nil, errors.New("not a kioku archive: it is empty")
	}
	if err != nil {
		return nil, err
	}
	var probe struct {
		Kind    Kind   `json:"kind"`
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if json.Unmarshal(line, &probe) != nil || probe.Kind != KindHeader || probe.Format != formatName {
		return nil, errors.New("not a kioku archive: its first line is not a kioku-archive header")
	}
	if probe.Version < 1 || probe.Version > Version {
		return nil, fmt.Errorf("the archive is in format version %d; this kioku reads versions 1 to %d (an archive of a later version needs the kioku that wrote it, or a later one)", probe.Version, Version)
	}
	var h headerRecord
	if err := strict(line, &h); err != nil {
		return nil, rd.fail(KindHeader, err)
	}
	rd.version = h.Version
	rd.header = Header{Version: h.Version, Created: h.Created, Kioku: h.Kioku, Store: h.Store, App: h.App, User: h.User, Embedder: h.Embedder}
	return rd, nil
}

// Header returns the archive's header.
func (r *Reader) Header() Header { return r.header }

// Counts returns how many records of each kind were read so far.
func (r *Reader) Counts() Counts { return r.counts }

// next returns the next line, io.EOF at the end of the stream.
func (r *Reader) next() ([]byte, error) {
	if !r.sc.Scan() {
		if err := r.sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return nil, fmt.Errorf("line %d of the archive is longer than %d bytes", r.line+1, MaxLine)
			}
			return nil, fmt.Errorf("reading line %d of the archive: %w", r.line+1, err)
		}
		return nil, io.EOF
	}
	r.line++
	return r.sc.Bytes(), nil
}

func (r *Reader) fail(kind Kind, err error) error {
	return fmt.Errorf("line %d of the archive (a %s record): %w", r.line, kind, err)
}

// strict decodes one record, refusing fields the format does not have.
func strict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// kindOf returns the kind of an encoded record: its first key as this
// package writes it, else by decoding it.
func kindOf(line []byte) (Kind, error) {
	const prefix = `{"kind":"`
	if bytes.HasPrefix(line, []byte(prefix)) {
		rest := line[len(prefix):]
		if i := bytes.IndexByte(rest, '"'); i >= 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return Kind(rest[:i]), nil
		}
	}
	var probe struct {
		Kind Kind `json:"kind"`
	}
	if err := json.Unmarshal(line, &probe); err != nil {
		return "", err
	}
	return probe.Kind, nil
}

// Next returns the next record, and io.EOF after the end record. A stream
// that stops before its end record, or whose counts differ from the
// records read, is an error.
func (r *Reader) Next() (*Record, error) {
	if r.done {
		return nil, io.EOF
	}
	line, err := r.next()
	if err == io.EOF {
		return nil, fmt.Errorf("the archive stops after line %d without its end record: it is truncated", r.line)
	}
	if err != nil {
		return nil, err
	}
	kind, err := kindOf(line)
	if err != nil {
		return nil, fmt.Errorf("line %d of the archive is not a JSON object: %w", r.line, err)
	}
	if (kind == KindMemoryFile || kind == KindFileRevision) && r.version < 2 || (kind == KindBlock || kind == KindBlockRevision) && r.version < 4 {
		return nil, fmt.Errorf("line %d of the archive is a %s record, which format version %d does not have", r.line, kind, r.version)
	}
	rec, err := decode(kind, line)
	if err != nil {
		return nil, r.fail(kind, err)
	}
	if kind == KindEnd {
		r.done = true
		for k, n := range rec.Counts {
			if r.counts[k] != n {
				return nil, fmt.Errorf("the archive's end record counts %d %s records, but %d were read", n, k, r.counts[k])
			}
		}
		for k, n := range r.counts {
			if rec.Counts[k] != n {
				return nil, fmt.Errorf("the archive's end record counts %d %s records, but %d were read", rec.Counts[k], k, n)
			}
		}
		if _, err := r.next(); err != io.EOF {
			return nil, fmt.Errorf("line %d of the archive follows its end record", r.line)
		}
		return nil, io.EOF
	}
	r.counts[kind]++
	rec.Size = len(line)
	return rec, nil
}

// Close releases the reader (not the underlying stream).
func (r *Reader) Close() error { return r.gz.Close() }

// decode decodes one record of a known kind into domain values.
func decode(kind Kind, line []byte) (*Record, error) {
	rec := &Record{Kind: kind}
	switch kind {
	case KindAppState, KindUserState:
		var s stateRecord
		if err := strict(line, &s); err != nil {
			return nil, err
		}
		app, user, err := resource.ParseState("name", s.Name)
		if err != nil {
			return nil, err
		}
		if (user != "") != (kind == KindUserState) {
			return nil, fmt.Errorf("name %q is not the name of an %s", s.Name, kind)
		}
		if s.State == nil {
			s.State = map[string]any{}
		}
		rec.State = &sessiontype.SharedState{Ref: sessiontype.StateRef{App: app, User: user}, State: s.State, UpdateTime: s.UpdateTime}
	case KindSession:
		var s sessionRecord
		if err := strict(line, &s); err != nil {
			return nil, err
		}
		app, user, id, err := resource.ParseSession("name", s.Name)
		if err != nil {
			return nil, err
		}
		rec.Session = &sessiontype.Session{
			Key: sessiontype.Key{App: app, User: user, ID: id}, DisplayName: s.DisplayName, Labels: s.Labels,
			State: nonNil(s.State), InitialState: nonNil(s.InitialState),
			CreateTime: s.CreateTime, UpdateTime: s.UpdateTime, ExpireTime: s.ExpireTime, LastSequence: s.LastSequence,
			CompactionSequence: s.CompactionSequence, CompactedThrough: s.CompactedThrough,
		}
	case KindEvent:
		var e eventRecord
		if err := strict(line, &e); err != nil {
			return nil, err
		}
		app, user, id, err := resource.ParseSession("session", e.Session)
		if err != nil {
			return nil, err
		}
		if e.Event == nil {
			return nil, errors.New("it has no event")
		}
		rec.Of, rec.Event = sessiontype.Key{App: app, User: user, ID: id}, e.Event
	case KindSessionDeleted:
		var n nameRecord
		if err := strict(line, &n); err != nil {
			return nil, err
		}
		app, user, id, err := resource.ParseSession("name", n.Name)
		if err != nil {
			return nil, err
		}
		rec.Of = sessiontype.Key{App: app, User: user, ID: id}
	case KindConfig:
		var c configRecord
		if err := strict(line, &c); err != nil {
			return nil, err
		}
		app, err := resource.ParseMemoryBankConfig("name", c.Name)
		if err != nil {
			return nil, err
		}
		if rec.Config, err = record.UnmarshalConfig(app, c.Config); err != nil {
			return nil, err
		}
	case KindMemory:
		var m memoryRecord
		if err := strict(line, &m); err != nil {
			return nil, err
		}
		app, id, err := resource.ParseMemory("name", m.Name)
		if err != nil {
			return nil, err
		}
		mem := &memorytype.Memory{
			App: app, ID: id, Fact: m.Fact, DisplayName: m.DisplayName, Description: m.Description,
			Scope: m.Scope, Topics: m.Topics, Metadata: m.Metadata, Profile: m.Profile,
			CreateTime: m.CreateTime, UpdateTime: m.UpdateTime, ExpireTime: m.ExpireTime, EventTime: m.EventTime, StatedTime: m.StatedTime,
			Revision: m.Revision, Deleted: m.Deleted, EmbeddingModel: m.EmbeddingModel,
		}
		if mem.Sources, err = record.UnmarshalSources(m.Sources); err != nil {
			return nil, err
		}
		if mem.Embedding, err = decodeVector(m.Embedding); err != nil {
			return nil, fmt.Errorf("embedding: %w", err)
		}
		rec.Memory = mem
	case KindRevision:
		var r revisionRecord
		if err := strict(line, &r); err != nil {
			return nil, err
		}
		app, memory, number, err := parseRevision(r.Name)
		if err != nil {
			return nil, err
		}
		if rec.Revision, err = record.UnmarshalRevision(app, memory, number, r.Revision); err != nil {
			return nil, err
		}
	case KindWatermark:
		var w watermarkRecord
		if err := strict(line, &w); err != nil {
			return nil, err
		}
		app, _, _, err := resource.ParseSession("session", w.Session)
		if err != nil {
			return nil, err
		}
		rec.Watermark = &memorydriver.Watermark{App: app, Session: w.Session, Sequence: w.Sequence}
	case KindOperation:
		var o operationRecord
		if err := strict(line, &o); err != nil {
			return nil, err
		}
		app, id, err := resource.ParseOperation("name", o.Name)
		if err != nil {
			return nil, err
		}
		if rec.Operation, err = record.DecodeOperation(app, id, o.Operation); err != nil {
			return nil, err
		}
	case KindMemoryFile, KindFileRevision:
		if err := decodeFileRecord(rec, line); err != nil {
			return nil, err
		}
	case KindBlock, KindBlockRevision:
		if err := decodeBlockRecord(rec, line); err != nil {
			return nil, err
		}
	case KindEnd:
		var e endRecord
		if err := strict(line, &e); err != nil {
			return nil, err
		}
		rec.Counts = e.Records
	default:
		return nil, fmt.Errorf("unknown record kind %q (the archive says format version %d, whose kinds this kioku knows: is it damaged?)", kind, Version)
	}
	return rec, nil
}

// parseRevision parses a revision's name.
func parseRevision(name string) (app, memory string, number int64, err error) {
	v, err := resource.Revision.Parse("name", name)
	if err != nil {
		return "", "", 0, err
	}
	number, err = strconv.ParseInt(v[2], 10, 64)
	if err != nil || number < 1 {
		return "", "", 0, fmt.Errorf("name %q: the revision is not a number from 1", name)
	}
	return v[0], v[1], number, nil
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
