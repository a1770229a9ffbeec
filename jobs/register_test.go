package jobs_test

import (
	"context"
	"testing"

	"github.com/kioku-ai/kioku/internal/jobstore/memstore"
	"github.com/kioku-ai/kioku/jobs"
)

// TestRegisterNeedsDomain: a kind is registered with the domain its
// operations are counted under, a lower-case word; without one, or with
// another name, Register panics (a wiring mistake).
func TestRegisterNeedsDomain(t *testing.T) {
	run := func(context.Context, *jobs.Batch) (*jobs.Outcome, error) { return &jobs.Outcome{}, nil }
	for _, domain := range []string{"", "Memory", "memory_bank", "session 2"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register of a kind with domain %q did not panic", domain)
				}
			}()
			jobs.New(memstore.New(), jobs.Config{}).Register(jobs.Kind{Name: "K", Domain: domain, Run: run})
		}()
	}
	jobs.New(memstore.New(), jobs.Config{}).Register(jobs.Kind{Name: "K", Domain: "session", Run: run})
}
