// Package cluster shares the rate limits of the servers that serve one
// store among them, without a store write per call.
//
// Each server is a member: every Interval it writes a member record (its
// id, the fraction of every limit it grants, and an expiry of three
// intervals) and reads the records of the others that have not expired.
// It then grants
//
//	min(1/N, 1 - the sum of the others' fractions)
//
// of each limit, N being the live members, itself included: an equal share
// once every member has seen every other, and never more than the others
// leave free. A server that joins grants nothing until the others have
// lowered their fractions at their next beat; a server that leaves (or
// dies) keeps its fraction until its record is deleted (or expires), and
// the others take it over at their next beat. A member grants its fraction
// only until its own record expires: one that cannot beat stops granting,
// since the others will soon count it gone.
//
// A beat is one store transaction over the member records, so two beats
// never both read the fractions the other is replacing; a member lowers
// what it grants before its beat commits and raises it after. The sum of
// the fractions granted at any time is therefore at most 1, up to the
// clocks' skew on expiries (see docs/operations.md, "Running several
// servers").
//
// The live members' ids also order the servers (Rank): the order in
// which they take a dead server's memory operations over
// (jobs.Config.Rank).
package cluster

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"
)

// Member is one server's record.
type Member struct {
	// ID names the server.
	ID string
	// Fraction is the part of every limit the server grants, in [0, 1],
	// until Expires.
	Fraction float64
	// Expires is when the record stops counting, unless renewed.
	Expires time.Time
}

// Registry keeps the member records of the servers that share a store.
type Registry interface {
	// Beat runs decide, in one transaction, on the records of the members
	// other than self.ID that have not expired at now, and stores the
	// record it returns for self. decide may run more than once.
	Beat(ctx context.Context, self string, now time.Time, decide func(others []Member) Member) error
	// Leave deletes a member's record.
	Leave(ctx context.Context, id string) error
}

// Config configures a Membership.
type Config struct {
	// Registry holds the member records.
	Registry Registry
	// ID names this server; it must differ from every other member's.
	ID string
	// Interval is how often the server beats. Default DefaultInterval.
	Interval time.Duration
	// Logger receives a line when beats start or stop failing. Nil:
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// DefaultInterval is how often a member beats by default.
const DefaultInterval = time.Second

// recordLife is how many intervals a record lasts without a beat.
const recordLife = 3

// Membership is this server's membership: the share of the limits it
// grants (Share), kept by Run.
type Membership struct {
	cfg Config

	mu       sync.Mutex
	fraction float64   // granted until until
	until    time.Time // the expiry of this server's stored record
	servers  int       // the live members at the last beat, this one included
	others   []string  // the ids of the other live members at the last beat, sorted
	failing  bool
}

// New returns a Membership that grants nothing until its first beat.
func New(cfg Config) *Membership {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Membership{cfg: cfg, servers: 1}
}

// Share returns the fraction of each rate limit this server may grant
// now, and how many servers share the limits (auth.ShareSource).
func (m *Membership) Share() (float64, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.cfg.Now().Before(m.until) {
		return 0, m.servers
	}
	return m.fraction, m.servers
}

// Interval is how often the server beats: the longest a server that joins
// waits for a share.
func (m *Membership) Interval() time.Duration { return m.cfg.Interval }

// Run beats at once and then every Interval until ctx is done, then
// deletes this server's record so that the others take its share at
// their next beat.
func (m *Membership) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		m.Beat(ctx)
		select {
		case <-ctx.Done():
			leave, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.Interval)
			defer cancel()
			if err := m.cfg.Registry.Leave(leave, m.cfg.ID); err != nil {
				m.cfg.Logger.Warn("could not delete this server's member record; the others take its share when it expires", "error", err)
			}
			return
		case <-t.C:
		}
	}
}

// Beat renews this server's record and its share once.
func (m *Membership) Beat(ctx context.Context) {
	now := m.cfg.Now()
	var next Member
	var servers int
	var ids []string
	err := m.cfg.Registry.Beat(ctx, m.cfg.ID, now, func(others []Member) Member {
		next, servers = Decide(m.cfg.ID, others, now.Add(recordLife*m.cfg.Interval)), len(others)+1
		ids = ids[:0]
		for _, o := range others {
			ids = append(ids, o.ID)
		}
		// Lower what is granted before the record says so.
		m.mu.Lock()
		m.fraction = min(m.fraction, next.Fraction)
		m.mu.Unlock()
		return next
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if !m.failing {
			m.cfg.Logger.Warn("this server could not renew its member record; it grants its share of the rate limits until the record expires, then none", "expires", m.until, "error", err)
		}
		m.failing = true
		return
	}
	if m.failing {
		m.cfg.Logger.Info("this server renewed its member record again", "fraction", next.Fraction, "servers", servers)
	}
	m.failing = false
	m.fraction, m.until, m.servers = next.Fraction, next.Expires, servers
	slices.Sort(ids)
	m.others = ids
}

// Rank returns this server's position, 0 for the first, among the live
// members at its last beat other than except (a server that may have
// died), ordered by id: the order in which servers take a dead server's
// operations over (jobs.Config.Rank). Every server that has seen the same
// members computes a rank of its own.
func (m *Membership) Rank(except string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := 0
	for _, id := range m.others {
		if id < m.cfg.ID && id != except {
			r++
		}
	}
	return r
}

// Decide returns the record of member self given the live records of the
// others: an equal share of the live members, at most what the others
// leave free, never below zero.
func Decide(self string, others []Member, expires time.Time) Member {
	used := 0.0
	for _, o := range others {
		used += o.Fraction
	}
	f := min(1/float64(len(others)+1), 1-used)
	// Rounding must not make the sum of the fractions pass 1.
	f = math.Max(0, math.Floor(f*1e9)/1e9)
	return Member{ID: self, Fraction: f, Expires: expires}
}
