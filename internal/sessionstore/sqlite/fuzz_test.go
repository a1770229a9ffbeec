package sqlite_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/sessionstore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// fuzzService is one store shared by every input of a fuzzing process;
// each input works in an app of its own.
var (
	fuzzOnce sync.Once
	fuzzSvc  *sessions.Service
	fuzzErr  error
	fuzzN    atomic.Int64
)

func fuzzService(t *testing.T) *sessions.Service {
	fuzzOnce.Do(func() {
		var db *sqlitedb.DB
		db, fuzzErr = sqlitedb.Open(filepath.Join(t.TempDir(), "fuzz.db"))
		if fuzzErr != nil {
			return
		}
		var s *sqlite.Store
		if s, fuzzErr = sqlite.New(db); fuzzErr == nil {
			fuzzSvc = sessions.NewService(s, sessions.Config{Limits: sessions.Limits{MaxStateBytes: 4 << 10, MaxEventBytes: 8 << 10}})
		}
	})
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	return fuzzSvc
}

// FuzzStateDeltaAndNames feeds arbitrary session ids, user ids, state keys
// and JSON deltas through create, append and read. Whatever the input, the
// service must not crash, must reject bad input with Invalid or
// ResourceExhausted, and must leave the stored state exactly as a model of
// the rules predicts: applied in full, or not at all.
func FuzzStateDeltaAndNames(f *testing.F) {
	for _, seed := range []struct {
		session, user, key string
		delta              string
	}{
		{"s1", "u1", "k", `{"a": 1, "user:b": "x", "app:c": [1, 2, {"d": null}]}`},
		{"s-2", "ann@example.com", "temp:t", `{"temp:x": 1, "y": null}`},
		{"../etc", "u", "user:", `{}`},
		{"a/b", "u", "app:", `{"": 1}`},
		{"__x__", "u/v", "k\xff", `{"k": "\xff"}`},
		{"s", "u", "deep", `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`},
		{"s", "u", "big", `"` + string(make([]byte, 5000)) + `"`},
		{"", "", "", `not json`},
	} {
		f.Add(seed.session, seed.user, seed.key, []byte(seed.delta))
	}
	f.Fuzz(func(t *testing.T, sessionID, userID, key string, raw []byte) {
		svc := fuzzService(t)
		ctx := t.Context()
		app := fmt.Sprintf("fuzz%d", fuzzN.Add(1))

		// The delta: a JSON object as given, plus key set to the JSON value
		// of raw (or to raw as a string when it is not JSON).
		delta := map[string]any{}
		var obj map[string]any
		if json.Unmarshal(raw, &obj) == nil {
			for k, v := range obj {
				delta[k] = v
			}
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			v = string(raw)
		}
		delta[key] = v

		sess, err := svc.CreateSession(ctx, sessions.CreateSessionRequest{App: app, User: userID, ID: sessionID})
		if err != nil {
			if k := fault.KindOf(err); k != fault.Invalid {
				t.Fatalf("CreateSession(%q, %q): %v (kind %v), want Invalid or success", userID, sessionID, err, k)
			}
			return
		}
		_, appendErr := svc.AppendEvent(ctx, sess.Key, &sessiontype.Event{ID: "e1", Author: "user", Actions: sessiontype.Actions{StateDelta: delta}}, nil)
		if appendErr != nil {
			if k := fault.KindOf(appendErr); k != fault.Invalid && k != fault.ResourceExhausted {
				t.Fatalf("AppendEvent: %v (kind %v), want Invalid, ResourceExhausted or success", appendErr, k)
			}
		}
		got, events, err := svc.GetSession(ctx, sess.Key, sessions.GetSessionRequest{})
		if err != nil {
			t.Fatalf("GetSession after append: %v", err)
		}
		want := map[string]any{}
		wantEvents := 0
		if appendErr == nil {
			d := sessiontype.SplitDelta(delta)
			want = sessiontype.Merge(sessiontype.ApplyDelta(nil, d.Session), sessiontype.ApplyDelta(nil, d.User), sessiontype.ApplyDelta(nil, d.App))
			wantEvents = 1
		}
		// reflect.DeepEqual first: cmp's diffing is exponential on deeply
		// nested lists, so it only explains a difference already found.
		if !reflect.DeepEqual(want, got.State) {
			t.Fatalf("state after append (err %v) differs from the model (-want +got):\n%s", appendErr, cmp.Diff(want, got.State))
		}
		if len(events) != wantEvents || got.LastSequence != int64(wantEvents) {
			t.Fatalf("%d events, last sequence %d after append (err %v); want %d", len(events), got.LastSequence, appendErr, wantEvents)
		}
	})
}
