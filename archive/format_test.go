package archive

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// filler sets every field of a value, recursively, to a value of its own:
// a record that loses a field, including one added to a domain type after
// this test was written, no longer equals what was written.
type filler struct{ n int }

var timeType = reflect.TypeFor[time.Time]()

func (f *filler) fill(v reflect.Value) {
	f.n++
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, f.n*1001, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", f.n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1 + int64(f.n%3)) // small: enums stay valid
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.n) + 0.25)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		f.fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		f.fill(k)
		e := reflect.New(v.Type().Elem()).Elem()
		f.fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(fmt.Sprintf("any%d", f.n)))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	}
}

func filled[T any](f *filler) *T {
	var v T
	f.fill(reflect.ValueOf(&v).Elem())
	return &v
}

// writeRead writes records with fn and reads them back.
func writeRead(t *testing.T, fn func(w *Writer) error) []*Record {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Created: time.Now(), Store: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

// TestRecordsKeepEveryField writes domain values with every field set
// and compares what is read back with go-cmp: a field the format forgets
// fails here.
func TestRecordsKeepEveryField(t *testing.T) {
	f := &filler{}
	state := filled[sessiontype.SharedState](f)
	state.Ref.User = "u1"
	appState := filled[sessiontype.SharedState](f)
	appState.Ref.User = ""
	sess := filled[sessiontype.Session](f)
	event := filled[sessiontype.Event](f)
	event.Partial = false // never stored
	config := filled[appconfig.Config](f)
	mem := filled[memorytype.Memory](f)
	// Metadata of every type (the filler leaves values empty strings).
	mem.Metadata = metadata.Map{"s": metadata.String("x"), "d": metadata.Double(-2.5e-3),
		"b": metadata.Bool(true), "t": metadata.Timestamp(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))}
	rev := filled[memorytype.Revision](f)
	rev.Action = memorytype.Updated
	wm := filled[memorydriver.Watermark](f)
	wm.Session = "apps/" + wm.App + "/users/u/sessions/s"
	op := filled[jobs.Operation](f)
	op.State, op.ErrorKind = jobs.Failed, 2
	// The request and result are the kind's JSON objects.
	op.Request, op.Result = []byte(`{"scope":{"user_id":"u1"},"filter":"x"}`), []byte(`{"purge_count":3}`)

	got := writeRead(t, func(w *Writer) error {
		for _, fn := range []func() error{
			func() error { return w.State(state) },
			func() error { return w.State(appState) },
			func() error { return w.Session(sess) },
			func() error { return w.Event(sess.Key, event) },
			func() error { return w.SessionDeleted(sess.Key) },
			func() error { return w.Config(config) },
			func() error { return w.Memory(mem) },
			func() error { return w.Revision(rev) },
			func() error { return w.Watermark(*wm) },
			func() error { return w.Operation(op) },
		} {
			if err := fn(); err != nil {
				return err
			}
		}
		return nil
	})
	want := []*Record{
		{Kind: KindUserState, State: state},
		{Kind: KindAppState, State: appState},
		{Kind: KindSession, Session: sess},
		{Kind: KindEvent, Event: event, Of: sess.Key},
		{Kind: KindSessionDeleted, Of: sess.Key},
		{Kind: KindConfig, Config: config},
		{Kind: KindMemory, Memory: mem},
		{Kind: KindRevision, Revision: rev},
		{Kind: KindWatermark, Watermark: wm},
		{Kind: KindOperation, Operation: op},
	}
	// What the stores never keep is not archived either: an event's input
	// flag and read-time size; a webhook's mark of a secret generated by
	// the update that answers it; an operation's result lists its memories
	// without their vectors (the memories themselves hold them).
	unstored := cmp.Options{cmpopts.IgnoreFields(sessiontype.Event{}, "KeepZeroTimestamp", "Size"), cmpopts.IgnoreFields(appconfig.Webhook{}, "SecretGenerated"), cmpopts.IgnoreFields(Record{}, "Size")}
	for i := range want {
		if i >= len(got) {
			t.Fatalf("read %d records, wrote %d", len(got), len(want))
		}
		if diff := cmp.Diff(want[i], got[i], unstored); diff != "" {
			t.Errorf("%s record read back (-written +read):\n%s", want[i].Kind, diff)
		}
	}
}

func gz(lines ...string) *bytes.Buffer {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	for _, l := range lines {
		io.WriteString(w, l+"\n")
	}
	w.Close()
	return &buf
}

const (
	header  = `{"kind":"header","format":"kioku-archive","version":1,"created":"2026-01-01T00:00:00Z"}`
	header2 = `{"kind":"header","format":"kioku-archive","version":2,"created":"2026-01-01T00:00:00Z"}`
)

// TestReadsMemoriesOfVersion2: a memory record of format version 2, with
// metadata of strings and no display name, reads as it was written.
func TestReadsMemoriesOfVersion2(t *testing.T) {
	r, err := NewReader(gz(header2,
		`{"kind":"memory","name":"apps/a/memories/m","fact":"The user likes tea.","scope":{"user_id":"u"},"metadata":{"source":"chat","n":"2"},"create_time":"2026-01-01T00:00:00Z","update_time":"2026-01-01T00:00:00Z","revision":1}`,
		`{"kind":"end","records":{"memory":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	want := metadata.Map{"source": metadata.String("chat"), "n": metadata.String("2")}
	if m := rec.Memory; m == nil || m.Fact != "The user likes tea." || m.DisplayName != "" || !m.Metadata.Equal(want) {
		t.Fatalf("version-2 memory read as %+v", rec.Memory)
	}
}

// TestReaderRefuses checks that what is not a whole archive of a version
// this package reads is refused with a message saying what is wrong.
func TestReaderRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    *bytes.Buffer
		atNew bool // refused by NewReader, else by Next
		want  string
	}{
		{"not gzip", bytes.NewBufferString("hello"), true, "not a kioku archive"},
		{"empty", gz(), true, "it is empty"},
		{"other json", gz(`{"a":1}`), true, "not a kioku-archive header"},
		{"later version", gz(`{"kind":"header","format":"kioku-archive","version":5}`), true, "format version 5; this kioku reads versions 1 to 4"},
		{"unknown header field", gz(`{"kind":"header","format":"kioku-archive","version":1,"shard":3}`), true, `unknown field "shard"`},
		{"truncated", gz(header, `{"kind":"app_state","name":"apps/a/state","state":{}}`), false, "without its end record: it is truncated"},
		{"unknown kind", gz(header, `{"kind":"vector_index","name":"x"}`), false, `unknown record kind "vector_index"`},
		{"unknown field", gz(header, `{"kind":"app_state","name":"apps/a/state","state":{},"owner":"x"}`), false, `line 2 of the archive (a app_state record): json: unknown field "owner"`},
		{"bad name", gz(header, `{"kind":"session","name":"apps/a/sessions/s","last_sequence":1}`), false, "is not of the form apps/{app}/users/{user}/sessions/{session}"},
		{"counts differ", gz(header, `{"kind":"app_state","name":"apps/a/state","state":{}}`, `{"kind":"end","records":{"app_state":2}}`), false, "counts 2 app_state records, but 1 were read"},
		{"after the end", gz(header, `{"kind":"end","records":{}}`, `{"kind":"end","records":{}}`), false, "follows its end record"},
		{"memory file in version 1", gz(header, `{"kind":"memory_file","name":"apps/a/users/u/memoryFiles/f","path":"/memories/x","content":"x","revision":1}`), false, "a memory_file record, which format version 1 does not have"},
		{"memory file outside /memories", gz(header2, `{"kind":"memory_file","name":"apps/a/users/u/memoryFiles/f","path":"/memories/../etc/passwd","content":"x","revision":1}`), false, `path: The path "/memories/../etc/passwd" is not allowed`},
		{"memory file at the root", gz(header2, `{"kind":"memory_file","name":"apps/a/users/u/memoryFiles/f","path":"/memories/","content":"x","revision":1}`), false, `path "/memories/" is not the path of a memory file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(tc.in)
			if err == nil && !tc.atNew {
				for err == nil {
					_, err = r.Next()
				}
			}
			if err == nil || err == io.EOF || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestVectorForm(t *testing.T) {
	v := []float32{0, 1.5, -2.25e-7, 3.4e38}
	s := encodeVector(v)
	got, err := decodeVector(s)
	if err != nil || !cmp.Equal(v, got) {
		t.Fatalf("decodeVector(encodeVector(%v)) = %v, %v", v, got, err)
	}
	// Little-endian float32: 1.5 is 0x3fc00000.
	if s := encodeVector([]float32{0, 1.5}); s != "AAAAAAAAwD8=" {
		t.Fatalf("encodeVector([0 1.5]) = %q, want little-endian float32 values in base64", s)
	}
	if _, err := decodeVector("AAAAAAA="); err == nil {
		t.Fatal("a vector of 5 bytes was decoded")
	}
}
