package cluster_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/cluster"
	"github.com/kioku-ai/kioku/internal/firestoretest"
)

// TestDecide: an equal share once every member has seen every other,
// never more than the others leave free, never below zero.
func TestDecide(t *testing.T) {
	exp := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		others []float64
		want   float64
	}{
		{nil, 1},
		{[]float64{1}, 0},        // joins a lone server: waits for it to halve
		{[]float64{0.5}, 0.5},    // it did
		{[]float64{0.5, 0.5}, 0}, // the third joins
		{[]float64{1.0 / 3, 0.5}, 1.0 / 6},
		{[]float64{1.0 / 3, 1.0 / 3}, 1.0 / 3},
		{[]float64{0.7, 0.7}, 0}, // never negative
	} {
		var others []cluster.Member
		for _, f := range c.others {
			others = append(others, cluster.Member{Fraction: f})
		}
		got := cluster.Decide("me", others, exp)
		if math.Abs(got.Fraction-c.want) > 1e-6 || got.Fraction > c.want || got.ID != "me" || !got.Expires.Equal(exp) {
			t.Errorf("Decide(others %v) = %+v; want fraction %v", c.others, got, c.want)
		}
	}
}

// clock is a settable clock shared by the members of a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestMembersOnFirestore: members on the emulator beating concurrently
// never grant more than the whole limit together, settle on equal
// shares and on their ranks, take over the share of a member that leaves at their next beat
// and of one that dies once its record expires; a member that cannot
// beat stops granting when its own record expires.
func TestMembersOnFirestore(t *testing.T) {
	c, _ := firestoretest.NewClient(t)
	reg := cluster.NewFirestore(c)
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	member := func(id string) *cluster.Membership {
		return cluster.New(cluster.Config{Registry: reg, ID: id, Interval: time.Second, Logger: quiet, Now: clk.Now})
	}
	ctx := t.Context()
	ms := []*cluster.Membership{member("a"), member("b"), member("c")}
	total := func() float64 {
		sum := 0.0
		for _, m := range ms {
			f, _ := m.Share()
			sum += f
		}
		return sum
	}
	if f, _ := ms[0].Share(); f != 0 {
		t.Fatalf("a member grants %v before its first beat; want 0", f)
	}
	// Rounds of concurrent beats: the sum stays within 1 after each, and
	// after a few the shares are equal.
	for round := range 4 {
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() { m.Beat(ctx) })
		}
		wg.Wait()
		if s := total(); s > 1+1e-9 {
			t.Fatalf("round %d: the members grant %v of the limit together", round, s)
		}
		clk.add(time.Second)
	}
	for i, m := range ms {
		if f, n := m.Share(); math.Abs(f-1.0/3) > 1e-6 || n != 3 {
			t.Errorf("member %d grants %v of %d servers; want 1/3 of 3", i, f, n)
		}
	}
	// The order in which they take over a dead server's operations: by id,
	// the dead one left out.
	for _, c := range []struct {
		m       int
		except  string
		want    int
		meaning string
	}{
		{0, "", 0, "a first"}, {1, "", 1, "b second"}, {2, "", 2, "c third"},
		{1, "a", 0, "b first without a"}, {2, "a", 1, "c second without a"}, {2, "b", 1, "c second without b"},
		{0, "c", 0, "a first without c"},
	} {
		if got := ms[c.m].Rank(c.except); got != c.want {
			t.Errorf("Rank(%q) of member %d = %d; want %d (%s)", c.except, c.m, got, c.want, c.meaning)
		}
	}

	// c leaves: a and b take its share at their next beat (a first, while
	// b still holds a third: a can take only what is free).
	if err := reg.Leave(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	ms = ms[:2]
	ms[0].Beat(ctx)
	ms[1].Beat(ctx)
	ms[0].Beat(ctx)
	for i, m := range ms {
		if f, n := m.Share(); math.Abs(f-0.5) > 1e-6 || n != 2 {
			t.Errorf("after c left, member %d grants %v of %d servers; want 1/2 of 2", i, f, n)
		}
	}

	// b dies (stops beating): a takes its share only once b's record has
	// expired (three intervals), never before.
	for range 2 {
		clk.add(time.Second)
		ms[0].Beat(ctx)
		if f, _ := ms[0].Share(); f > 0.5+1e-9 {
			t.Fatalf("a grants %v while b's record is live", f)
		}
	}
	clk.add(2 * time.Second)
	ms[0].Beat(ctx)
	if f, n := ms[0].Share(); f != 1 || n != 1 {
		t.Errorf("after b's record expired, a grants %v of %d servers; want all of 1", f, n)
	}

	// a cannot beat (its context is done): it grants its share until its
	// record expires, then nothing.
	done, cancel := context.WithCancel(ctx)
	cancel()
	clk.add(2 * time.Second)
	ms[0].Beat(done)
	if f, _ := ms[0].Share(); f != 1 {
		t.Errorf("a failed beat within its record's life: a grants %v; want 1", f)
	}
	clk.add(time.Second)
	if f, _ := ms[0].Share(); f != 0 {
		t.Errorf("a's record expired: a grants %v; want 0", f)
	}
}
