// Package cluster shares the rate limits of the servers that serve one
// store among them, without a store write per call.
//
// Each server is a member: every Interval it reads the records of the
// others that have not expired and writes its own (its id, the fraction
// of every limit it claims, and an expiry of three intervals). It claims
//
//	min(1/N, 1 - the sum of the others' claims)
//
// of each limit, N being the live members, itself included: an equal share
// once every member has seen every other, and never more than the others
// leave free. A server that joins claims nothing until the others have
// lowered their claims at their next beat; a server that leaves (or dies)
// keeps its claim until its record is deleted (or expires), and the others
// take it over at their next beat. A member grants its share only until
// its own record expires: one that cannot beat stops granting, since the
// others will soon count it gone.
//
// No beat takes a lock: a member writes only its own record, so beats of
// different servers never wait on each other. What a member grants never
// exceeds what its stored record claims: it lowers its grant before it
// writes a lower claim, and to raise it writes the higher claim first,
// reads the others' claims again, and grants only what they leave free.
// Of two members raising at once, at least one reads the other's new
// claim (each writes before it reads), so the grants sum to at most 1 at
// every moment, up to the clocks' skew on expiries (see
// docs/operations.md, "Running several servers"). Expired records are
// deleted only if unchanged since they were read, so a late renewal is
// never lost.
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
	// Fraction is the part of every limit the server claims, in [0, 1],
	// until Expires: at least what it grants.
	Fraction float64
	// Expires is when the record stops counting, unless renewed.
	Expires time.Time
}

// Registry keeps the member records of the servers that share a store.
type Registry interface {
	// Others returns the records of the members other than self that have
	// not expired at now, after every write to them that finished before
	// the call. It may delete expired records, but not one renewed since
	// it read it.
	Others(ctx context.Context, self string, now time.Time) ([]Member, error)
	// Put stores a member's record.
	Put(ctx context.Context, m Member) error
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
	return m.grantedLocked(), m.servers
}

// Interval is how often the server beats: the longest a server that joins
// waits for a share.
func (m *Membership) Interval() time.Duration { return m.cfg.Interval }

// Run beats at once and then every Interval until ctx is done, then
// stops granting and deletes this server's record so that the others
// take its share at their next beat.
func (m *Membership) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		m.Beat(ctx)
		select {
		case <-ctx.Done():
			m.mu.Lock()
			m.fraction = 0
			m.mu.Unlock()
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
	expires := now.Add(recordLife * m.cfg.Interval)
	others, err := m.cfg.Registry.Others(ctx, m.cfg.ID, now)
	if err != nil {
		m.failed(err)
		return
	}
	next := Decide(m.cfg.ID, others, expires)
	m.mu.Lock()
	granted := m.grantedLocked()
	if next.Fraction < granted {
		// Lower what is granted before the record says so.
		m.fraction = next.Fraction
	}
	m.mu.Unlock()
	if err := m.cfg.Registry.Put(ctx, next); err != nil {
		m.failed(err)
		return
	}
	grant := next.Fraction
	if grant > granted {
		// Raise only to what the others leave free once they can see
		// this claim: one raising at the same time sees it, or was seen.
		again, err := m.cfg.Registry.Others(ctx, m.cfg.ID, now)
		if err != nil {
			// The claim stored covers the old grant until the new expiry.
			grant = granted
		} else {
			grant = min(grant, Decide(m.cfg.ID, again, expires).Fraction)
		}
	}
	ids := make([]string, 0, len(others))
	for _, o := range others {
		ids = append(ids, o.ID)
	}
	slices.Sort(ids)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failing {
		m.cfg.Logger.Info("this server renewed its member record again", "fraction", grant, "servers", len(others)+1)
	}
	m.failing = false
	m.fraction, m.until, m.servers, m.others = grant, expires, len(others)+1, ids
}

// grantedLocked is the fraction granted now; m.mu is held.
func (m *Membership) grantedLocked() float64 {
	if !m.cfg.Now().Before(m.until) {
		return 0
	}
	return m.fraction
}

// failed notes a beat that could not renew the record.
func (m *Membership) failed(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.failing {
		m.cfg.Logger.Warn("this server could not renew its member record; it grants its share of the rate limits until the record expires, then none", "expires", m.until, "error", err)
	}
	m.failing = true
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
