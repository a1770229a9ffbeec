package sqlite_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/kioku-ai/kioku/internal/sessionstore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/internal/suitetest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiondriver/sessiondrivertest"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

func newStore(t *testing.T) sessiondriver.Store { return openStore(t, false) }

// openStore opens a store in a new database, encrypted or not.
func openStore(t testing.TB, encrypted bool) *sqlite.Store {
	if encrypted {
		return sqlitetest.Sessions(t, sqlitetest.OpenEncrypted(t))
	}
	return sqlitetest.Sessions(t, sqlitetest.Open(t))
}

func TestConformance(t *testing.T) {
	sessiondrivertest.Run(t, newStore)
}

// TestConformanceEncrypted runs the suite on an encrypted database: every
// read and search works on sealed values and hashed terms.
func TestConformanceEncrypted(t *testing.T) {
	sessiondrivertest.Run(t, func(t *testing.T) *sqlite.Store { return openStore(t, true) })
}

// BenchmarkAppendParallel measures durable appends through the Service
// without RPC: concurrent goroutines, a session each, with the search
// indexer running as a server runs it (its last batch included).
func BenchmarkAppendParallel(b *testing.B) {
	for _, encrypted := range []bool{false, true} {
		b.Run(fmt.Sprintf("encrypted=%v", encrypted), func(b *testing.B) { benchAppend(b, encrypted) })
	}
}

func benchAppend(b *testing.B, encrypted bool) {
	svc := sessions.NewService(openStore(b, encrypted), sessions.Config{})
	cancel, indexed := suitetest.Start(b.Context(), svc.RunIndexer)
	defer func() {
		cancel()
		<-indexed
	}()
	var n atomic.Int64
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		key := sessiontype.Key{App: "bench", User: "u", ID: fmt.Sprint("s", n.Add(1))}
		if _, err := svc.CreateSession(b.Context(), sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
			b.Error(err)
			return
		}
		for i := 0; pb.Next(); i++ {
			_, err := svc.AppendEvent(b.Context(), key, &sessiontype.Event{
				ID:      fmt.Sprint("e", i),
				Author:  "user",
				Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: "I would like a cup of green tea, please."}}},
				Actions: sessiontype.Actions{StateDelta: map[string]any{"turn": float64(i)}},
			}, nil)
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}
