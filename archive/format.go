package archive

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/memorybank/record"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Version is the version of the format this package writes. It reads
// every version from 1 (version 2 added the memory files, which a
// version-1 archive does not hold; version 3 memories' display names,
// descriptions and typed metadata values, in metadata.Map's stored
// form, which reads the string values of before as they were; version 4
// the core memory blocks).
const Version = 4

// formatName is the header's "format": what tells a kioku archive.
const formatName = "kioku-archive"

// MaxLine bounds one record's encoded size. The largest records are events
// and states, which kioku's limits keep far smaller.
const MaxLine = 64 << 20

// Kind is the kind of a record.
type Kind string

// The kinds of records.
const (
	KindHeader         Kind = "header"
	KindAppState       Kind = "app_state"
	KindUserState      Kind = "user_state"
	KindSession        Kind = "session"
	KindEvent          Kind = "event"
	KindSessionDeleted Kind = "session_deleted"
	KindConfig         Kind = "memory_bank_config"
	KindMemory         Kind = "memory"
	KindRevision       Kind = "revision"
	KindWatermark      Kind = "watermark"
	KindOperation      Kind = "operation"
	KindMemoryFile     Kind = "memory_file"
	KindFileRevision   Kind = "memory_file_revision"
	KindBlock          Kind = "block"
	KindBlockRevision  Kind = "block_revision"
	KindEnd            Kind = "end"
)

// Header is an archive's first record.
type Header struct {
	// Version is the format's version (Version when written here).
	Version int
	// Created is when the export started.
	Created time.Time
	// Kioku is the version of the kioku that wrote it.
	Kioku string
	// Store is the kind of store it was read from ("sqlite", "firestore").
	Store string
	// App and User are the selection: an empty App is the whole
	// installation, an empty User the whole app.
	App, User string
	// Embedder is the embedder the exporting installation ran.
	Embedder string
}

// Counts are how many records of each kind an archive holds (or an import
// wrote).
type Counts map[Kind]int64

// Record is one record of an archive. Kind says which field is set.
type Record struct {
	Kind Kind
	// State is an app_state or user_state record.
	State *sessiontype.SharedState
	// Session is a session record: its own state (not merged) and its
	// InitialState.
	Session *sessiontype.Session
	// Event is an event record of the session Of.
	Event *sessiontype.Event
	// Of is the session of an event, or the deleted session of a
	// session_deleted record.
	Of sessiontype.Key
	// Config is a memory_bank_config record.
	Config *appconfig.Config
	// Memory is a memory record, with its vector.
	Memory *memorytype.Memory
	// Revision is a revision record.
	Revision *memorytype.Revision
	// Watermark is a watermark record.
	Watermark *memorydriver.Watermark
	// Operation is an operation record.
	Operation *jobs.Operation
	// File is a memory_file record, with its content.
	File *memoryfiles.File
	// FileRevision is a memory_file_revision record.
	FileRevision *memoryfiles.Revision
	// Block is a block record.
	Block *blocks.Block
	// BlockRevision is a block_revision record.
	BlockRevision *blocks.Revision
	// Counts are the end record's.
	Counts Counts
	// Size is the size of the record's encoding, in bytes.
	Size int
}

// The records as they are encoded, one struct per kind. They are the
// format: a field changes only with a new Version.
type (
	headerRecord struct {
		Kind     Kind      `json:"kind"`
		Format   string    `json:"format"`
		Version  int       `json:"version"`
		Created  time.Time `json:"created"`
		Kioku    string    `json:"kioku,omitempty"`
		Store    string    `json:"store,omitempty"`
		App      string    `json:"app,omitempty"`
		User     string    `json:"user,omitempty"`
		Embedder string    `json:"embedder,omitempty"`
	}
	stateRecord struct {
		Kind       Kind           `json:"kind"`
		Name       string         `json:"name"`
		State      map[string]any `json:"state"`
		UpdateTime time.Time      `json:"update_time,omitzero"`
	}
	sessionRecord struct {
		Kind         Kind              `json:"kind"`
		Name         string            `json:"name"`
		DisplayName  string            `json:"display_name,omitempty"`
		Labels       map[string]string `json:"labels,omitempty"`
		State        map[string]any    `json:"state,omitempty"`
		InitialState map[string]any    `json:"initial_state,omitempty"`
		CreateTime   time.Time         `json:"create_time,omitzero"`
		UpdateTime   time.Time         `json:"update_time,omitzero"`
		ExpireTime   time.Time         `json:"expire_time,omitzero"`
		LastSequence int64             `json:"last_sequence"`
		// The session's latest compaction event and the last sequence it
		// covers (see sessiontype.Session).
		CompactionSequence int64 `json:"compaction_sequence,omitempty"`
		CompactedThrough   int64 `json:"compacted_through,omitempty"`
	}
	eventRecord struct {
		Kind    Kind               `json:"kind"`
		Session string             `json:"session"`
		Event   *sessiontype.Event `json:"event"`
	}
	nameRecord struct {
		Kind Kind   `json:"kind"`
		Name string `json:"name"`
	}
	configRecord struct {
		Kind   Kind            `json:"kind"`
		Name   string          `json:"name"`
		Config json.RawMessage `json:"config"`
	}
	memoryRecord struct {
		Kind           Kind              `json:"kind"`
		Name           string            `json:"name"`
		Fact           string            `json:"fact"`
		DisplayName    string            `json:"display_name,omitempty"`
		Description    string            `json:"description,omitempty"`
		Scope          map[string]string `json:"scope"`
		Topics         []string          `json:"topics,omitempty"`
		Metadata       metadata.Map      `json:"metadata,omitempty"`
		Sources        json.RawMessage   `json:"sources,omitempty"`
		CreateTime     time.Time         `json:"create_time,omitzero"`
		UpdateTime     time.Time         `json:"update_time,omitzero"`
		ExpireTime     time.Time         `json:"expire_time,omitzero"`
		EventTime      time.Time         `json:"event_time,omitzero"`
		StatedTime     time.Time         `json:"stated_time,omitzero"`
		Revision       int64             `json:"revision"`
		Deleted        bool              `json:"deleted,omitempty"`
		EmbeddingModel string            `json:"embedding_model,omitempty"`
		Embedding      string            `json:"embedding,omitempty"`
		Profile        *profile.Field    `json:"profile,omitempty"` // absent: natural language
	}
	revisionRecord struct {
		Kind     Kind            `json:"kind"`
		Name     string          `json:"name"`
		Revision json.RawMessage `json:"revision"`
	}
	watermarkRecord struct {
		Kind     Kind   `json:"kind"`
		Session  string `json:"session"`
		Sequence int64  `json:"sequence"`
	}
	operationRecord struct {
		Kind      Kind            `json:"kind"`
		Name      string          `json:"name"`
		Operation json.RawMessage `json:"operation"`
	}
	endRecord struct {
		Kind    Kind   `json:"kind"`
		Records Counts `json:"records"`
	}
)

// Writer writes an archive. Its methods are not safe for concurrent use.
type Writer struct {
	gz     *gzip.Writer
	buf    *bufio.Writer
	line   bytes.Buffer
	enc    *json.Encoder
	counts Counts
	err    error
}

// NewWriter writes the header of an archive to w and returns the Writer of
// its records. Close writes the end record; w itself is not closed.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	wr := &Writer{gz: gz, buf: bufio.NewWriterSize(gz, 256<<10), counts: Counts{}}
	wr.enc = json.NewEncoder(&wr.line)
	wr.enc.SetEscapeHTML(false)
	h.Version = Version
	err = wr.write(KindHeader, headerRecord{
		Kind: KindHeader, Format: formatName, Version: h.Version, Created: h.Created.UTC(),
		Kioku: h.Kioku, Store: h.Store, App: h.App, User: h.User, Embedder: h.Embedder,
	})
	if err != nil {
		return nil, err
	}
	delete(wr.counts, KindHeader)
	return wr, nil
}

// write encodes one record on a line of its own.
func (w *Writer) write(kind Kind, rec any) error {
	if w.err != nil {
		return w.err
	}
	w.line.Reset()
	if err := w.enc.Encode(rec); err != nil {
		return fmt.Errorf("encoding a %s record: %w", kind, err)
	}
	if w.line.Len() > MaxLine {
		return fmt.Errorf("a %s record of %d bytes is over the format's limit of %d", kind, w.line.Len(), MaxLine)
	}
	if _, err := w.buf.Write(w.line.Bytes()); err != nil {
		w.err = err
		return err
	}
	w.counts[kind]++
	return nil
}

// Counts returns how many records of each kind were written so far.
func (w *Writer) Counts() Counts { return w.counts }

// State writes an app_state record (st.Ref.User empty) or a user_state
// record.
func (w *Writer) State(st *sessiontype.SharedState) error {
	kind := KindAppState
	if st.Ref.User != "" {
		kind = KindUserState
	}
	return w.write(kind, stateRecord{Kind: kind, Name: st.Ref.Name(), State: st.State, UpdateTime: st.UpdateTime.UTC()})
}

// Session writes a session record: s with its own state.
func (w *Writer) Session(s *sessiontype.Session) error {
	return w.write(KindSession, sessionRecord{
		Kind: KindSession, Name: s.Name(), DisplayName: s.DisplayName, Labels: s.Labels,
		State: s.State, InitialState: s.InitialState,
		CreateTime: s.CreateTime.UTC(), UpdateTime: s.UpdateTime.UTC(), ExpireTime: s.ExpireTime.UTC(),
		LastSequence: s.LastSequence, CompactionSequence: s.CompactionSequence, CompactedThrough: s.CompactedThrough,
	})
}

// Event writes an event record of a session.
func (w *Writer) Event(of sessiontype.Key, e *sessiontype.Event) error {
	return w.write(KindEvent, eventRecord{Kind: KindEvent, Session: of.Name(), Event: e})
}

// SessionDeleted writes a session_deleted record.
func (w *Writer) SessionDeleted(key sessiontype.Key) error {
	return w.write(KindSessionDeleted, nameRecord{Kind: KindSessionDeleted, Name: key.Name()})
}

// Config writes a memory_bank_config record.
func (w *Writer) Config(c *appconfig.Config) error {
	body, err := record.MarshalConfig(c)
	if err != nil {
		return err
	}
	return w.write(KindConfig, configRecord{Kind: KindConfig, Name: resource.MemoryBankConfigName(c.App), Config: body})
}

// Memory writes a memory record, with its vector.
func (w *Writer) Memory(m *memorytype.Memory) error {
	sources, err := record.MarshalSources(m.Sources)
	if err != nil {
		return err
	}
	return w.write(KindMemory, memoryRecord{
		Kind: KindMemory, Name: m.Name(), Fact: m.Fact, DisplayName: m.DisplayName, Description: m.Description,
		Scope: m.Scope, Topics: m.Topics, Metadata: m.Metadata, Sources: sources, Profile: m.Profile,
		CreateTime: m.CreateTime.UTC(), UpdateTime: m.UpdateTime.UTC(), ExpireTime: m.ExpireTime.UTC(), EventTime: m.EventTime.UTC(), StatedTime: m.StatedTime.UTC(),
		Revision: m.Revision, Deleted: m.Deleted, EmbeddingModel: m.EmbeddingModel, Embedding: encodeVector(m.Embedding),
	})
}

// Revision writes a revision record.
func (w *Writer) Revision(r *memorytype.Revision) error {
	body, err := record.MarshalRevision(r)
	if err != nil {
		return err
	}
	return w.write(KindRevision, revisionRecord{Kind: KindRevision, Name: r.Name(), Revision: body})
}

// Watermark writes a watermark record.
func (w *Writer) Watermark(wm memorydriver.Watermark) error {
	return w.write(KindWatermark, watermarkRecord{Kind: KindWatermark, Session: wm.Session, Sequence: wm.Sequence})
}

// Operation writes an operation record.
func (w *Writer) Operation(op *jobs.Operation) error {
	body, err := jobs.MarshalOperation(op)
	if err != nil {
		return err
	}
	return w.write(KindOperation, operationRecord{Kind: KindOperation, Name: op.Name(), Operation: body})
}

// Close writes the end record with the counts and flushes the stream. It
// does not close the underlying writer.
func (w *Writer) Close() error {
	counts := Counts{}
	for k, n := range w.counts {
		counts[k] = n
	}
	if err := w.write(KindEnd, endRecord{Kind: KindEnd, Records: counts}); err != nil {
		return err
	}
	delete(w.counts, KindEnd)
	if err := w.buf.Flush(); err != nil {
		return err
	}
	return w.gz.Close()
}

// encodeVector returns the format's form of a vector: little-endian
// float32 values, base64-encoded; "" for none.
func encodeVector(v []float32) string {
	if len(v) == 0 {
		return ""
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func decodeVector(s string) ([]float32, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of float32 values", len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}
