package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/model"
)

// BenchmarkRetrieveProfiles reads a scope's profile (three fields) on the
// SQLite store beside n natural-language memories of the same scope: one
// indexed read of the profile fields, whatever n.
func BenchmarkRetrieveProfiles(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("memories=%d", n), func(b *testing.B) {
			ctx := b.Context()
			st := sqlitetest.Memories(b, sqlitetest.Open(b))
			now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			svc := memorybank.NewService(st, memorybank.Config{Now: func() time.Time { return now }, Embedder: model.Offline{}})
			schema := profile.Schema{ID: "user-profile", Fields: []profile.FieldSchema{
				{Name: "preferred_language", Type: profile.FieldString}, {Name: "tone", Type: profile.FieldString}, {Name: "age", Type: profile.FieldInteger}}}
			if _, err := svc.UpdateConfig(ctx, &appconfig.Config{App: "a", Profiles: []profile.Schema{schema}}, nil); err != nil {
				b.Fatal(err)
			}
			scope := memorytype.Scope{"user_id": "ann"}
			for i := range n {
				if _, err := svc.CreateMemory(ctx, "a", memorybank.MemoryInput{Fact: fmt.Sprintf("Ann noted thing number %d.", i), Scope: scope}); err != nil {
					b.Fatal(err)
				}
			}
			var changes []memorydriver.Change
			for _, f := range []struct {
				field string
				value any
			}{{"preferred_language", "Python"}, {"tone", "succinct"}, {"age", 34.0}} {
				p := &profile.Field{SchemaID: "user-profile", Field: f.field, Value: f.value}
				m := &memorytype.Memory{App: "a", ID: f.field, Scope: scope, Profile: p, Fact: f.field + ": " + profile.ValueText(f.value), CreateTime: now, UpdateTime: now, Revision: 1}
				changes = append(changes, memorydriver.Change{Memory: m, Revision: &memorytype.Revision{App: "a", MemoryID: m.ID, Number: 1, Action: memorytype.Created, Fact: m.Fact, Scope: scope, CreateTime: now, Profile: p}})
			}
			if err := st.Write(ctx, &memorydriver.Write{App: "a", Now: now, Changes: changes}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				ps, err := svc.RetrieveProfiles(ctx, "a", scope)
				if err != nil || len(ps) != 1 || len(ps[0].Values) != 3 {
					b.Fatalf("RetrieveProfiles = %+v, %v", ps, err)
				}
			}
		})
	}
}
