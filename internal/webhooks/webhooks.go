// Package webhooks delivers the memory bank's events to the webhooks of
// each app's configuration, as the Standard Webhooks specification says
// (headers webhook-id, webhook-timestamp, webhook-signature; HMAC-SHA256
// with the webhook's "whsec_" secret).
//
// The outbox is the memory bank's change feed, which every Write appends
// to in its own transaction: a change is in the feed if and only if it was
// committed. The feed also holds the events that are not a memory's
// change (operation.done, appended in the transaction that ends the
// operation; user.erased, once an erasure completed). A Dispatcher turns
// the feed into deliveries (one per change and webhook that wants its
// event type), moving the app's delivery cursor in the same store
// transaction, then sends them: at least once, in order
// per memory and webhook (a memory's next delivery waits for the one
// before it to be delivered or given up), retried with exponential backoff
// and full jitter for Config.RetryWindow (24 hours), then dead-lettered.
//
// One server at a time dispatches an app: the dispatch holds a lease in
// the store (memorydriver.Webhooks.ClaimWebhookLease), renewed before
// each round and fenced on every move of the cursor, as the jobs engine's
// operations are, so that two servers on one Firestore never send the same
// event at once. A round ends within its lease: it starts no request that
// could outlast three quarters of it, nor a first one that could outlast
// the lease (an attempt's timeout is at most half the lease), and leaves
// the rest to the next round, which renews it; so a receiver that hangs
// holds no delivery past the lease. The dispatch is not an operation of
// the jobs engine itself: its rounds would take workers from generations and count in the
// queues' bounds, so that a receiver that is down for a day would stop an
// app's memory generation; a dispatch shares no worker, queue or
// transaction with appends, retrieval or generation.
//
// A receiver that answers again gets its backlog at once: when a
// webhook recovers (an attempt succeeds after one that failed), each
// pending delivery of that webhook whose last attempt came before the
// recovery is due in the next round, rather than after the rest of its
// wait (up to an hour). An attempt brought forward that fails does not
// count as the webhook failing, so a delivery the receiver refuses for
// good is brought forward once per recovery, not at the pace of the
// others' successes. Recoveries are what this server saw: after its
// lease moves, the next server brings nothing forward until it sees one.
//
// Every request is bounded: no redirect is followed (a 3xx is a failed
// attempt), each attempt has a timeout, the answer is read up to a bound,
// and an app has at most Config.InFlightPerApp requests in flight.
package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/resource"
)

// Store is what a Dispatcher reads and writes: a memory store that keeps
// webhook deliveries (and so the change feed they are made from).
type Store interface {
	memorydriver.Store
	memorydriver.Webhooks
}

// Config configures a Dispatcher.
type Config struct {
	// Store holds the feed, the configurations and the deliveries.
	Store Store
	// Wake, when set, returns a channel that receives a value when an
	// app's memories changed through this server (memorybank.Service's
	// SubscribeChanges): its deliveries go out at once rather than at the
	// next poll.
	Wake func(app string) (<-chan struct{}, func())
	// Client sends the requests. Default: an http.Client that follows no
	// redirect.
	Client *http.Client
	Logger *slog.Logger
	Now    func() time.Time
	// Owner names this server in the dispatch leases. Default: random.
	Owner string
	// Lease is how long a dispatch lease lasts unrenewed. Default 30s.
	Lease time.Duration
	// ConfigWake, when set, subscribes to this server's configuration
	// updates, so that an app given webhooks here starts at once.
	ConfigWake func() (<-chan struct{}, func())
	// DiscoverInterval is how often the dispatcher lists the apps'
	// configurations for apps given webhooks on other servers. Default 30s.
	DiscoverInterval time.Duration
	// PollInterval is how soon a busy app's dispatch runs again (retries
	// due, deliveries held back). Default 1s.
	PollInterval time.Duration
	// IdleInterval is the longest an app's dispatch waits, with nothing
	// pending, before it looks for changes committed by other servers
	// (this server's changes wake it at once): the wait doubles from
	// PollInterval up to it. Default a third of Lease.
	IdleInterval time.Duration
	// AttemptTimeout bounds each request. Default 10s, and at most half
	// of Lease.
	AttemptTimeout time.Duration
	// MaxAnswerBytes bounds what is read of an answer. Default 64 KiB.
	MaxAnswerBytes int64
	// InFlightPerApp is the most requests an app has in flight. Default 8.
	InFlightPerApp int
	// RetryWindow is how long a delivery is retried, from its first
	// attempt, before it is dead-lettered. Default 24h.
	RetryWindow time.Duration
	// BaseDelay and MaxDelay shape the backoff: the n-th retry waits a
	// random time between zero and min(MaxDelay, BaseDelay*2^n) (full
	// jitter). Defaults 1s and 1h.
	BaseDelay, MaxDelay time.Duration
}

// Dispatcher delivers the apps' webhook events. Run runs it.
type Dispatcher struct {
	cfg Config
	log *slog.Logger
	now func() time.Time

	mu sync.Mutex
	// health is each app's webhooks' health, by URL (see the package
	// doc).
	health map[string]map[string]*health
}

// health is what a Dispatcher saw of a webhook's answers: whether its
// last attempt that counts failed, and when it last recovered.
type health struct {
	failing   bool
	recovered time.Time
}

// New returns a Dispatcher.
func New(cfg Config) *Dispatcher {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Owner == "" {
		cfg.Owner = "webhooks-" + aip.NewID()
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.IdleInterval <= 0 {
		cfg.IdleInterval = max(cfg.Lease/3, cfg.PollInterval)
	}
	if cfg.DiscoverInterval <= 0 {
		cfg.DiscoverInterval = 30 * time.Second
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 10 * time.Second
	}
	cfg.AttemptTimeout = min(cfg.AttemptTimeout, cfg.Lease/2)
	if cfg.MaxAnswerBytes <= 0 {
		cfg.MaxAnswerBytes = 64 << 10
	}
	if cfg.InFlightPerApp <= 0 {
		cfg.InFlightPerApp = 8
	}
	if cfg.RetryWindow <= 0 {
		cfg.RetryWindow = 24 * time.Hour
	}
	if cfg.BaseDelay <= 0 {
		cfg.BaseDelay = time.Second
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = time.Hour
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Dispatcher{cfg: cfg, log: cfg.Logger, now: cfg.Now, health: map[string]map[string]*health{}}
}

// Run dispatches until ctx ends: it looks for the apps with webhooks
// every DiscoverInterval, and when this server updates a configuration,
// and runs one loop per app.
func (d *Dispatcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var updated <-chan struct{}
	if d.cfg.ConfigWake != nil {
		ch, cancel := d.cfg.ConfigWake()
		defer cancel()
		updated = ch
	}
	running := map[string]bool{}
	t := time.NewTicker(d.cfg.DiscoverInterval)
	defer t.Stop()
	for {
		cfgs, err := d.cfg.Store.ListConfigs(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("webhooks: listing the apps' configurations failed", "err", err)
		}
		for _, c := range cfgs {
			if len(c.Webhooks) > 0 && !running[c.App] {
				running[c.App] = true
				wg.Go(func() { d.runApp(ctx, c.App) })
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-updated:
		case <-t.C:
		}
	}
}

// Idle is what Round returns when nothing of the app is pending, or
// another server holds its lease: the caller waits its idle wait.
const Idle = time.Duration(math.MaxInt64)

// runApp dispatches one app's events while this server holds its lease,
// and tries for the lease otherwise. While nothing is pending its wait
// doubles from PollInterval to IdleInterval, so an idle app costs a few
// store reads a minute; this server's changes wake it at once.
func (d *Dispatcher) runApp(ctx context.Context, app string) {
	var wake <-chan struct{}
	if d.cfg.Wake != nil {
		ch, cancel := d.cfg.Wake(app)
		defer cancel()
		wake = ch
	}
	idle := d.cfg.PollInterval
	for ctx.Err() == nil {
		wait, err := d.Round(ctx, app)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("webhooks: a dispatch round failed", "app", app, "err", err)
		}
		if wait == Idle && err == nil {
			wait, idle = idle, min(2*idle, d.cfg.IdleInterval)
		} else {
			wait, idle = min(max(wait, 0), d.cfg.PollInterval), d.cfg.PollInterval
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-wake:
			idle = d.cfg.PollInterval
		case <-t.C:
		}
		t.Stop()
	}
}

// Round runs one round of an app's dispatch: it takes or renews the
// app's lease, makes the deliveries of the changes committed since the
// last round, and sends those due (one per memory and webhook, in order).
// It returns how long until the next delivery is due (zero: now; the
// caller caps it), or Idle. Without the lease it does nothing.
func (d *Dispatcher) Round(ctx context.Context, app string) (time.Duration, error) {
	now := d.now()
	held, cursor, err := d.cfg.Store.ClaimWebhookLease(ctx, app, d.cfg.Owner, now, now.Add(d.cfg.Lease))
	if err != nil {
		return d.cfg.PollInterval, err
	}
	if !held {
		return Idle, nil
	}
	cfg, err := d.cfg.Store.GetConfig(ctx, app)
	if err != nil {
		return 0, err
	}
	if err := d.fanOut(ctx, app, cfg, cursor, now); err != nil {
		return 0, err
	}
	return d.send(ctx, app, cfg, now.Add(d.cfg.Lease))
}

// fanOut makes the deliveries of the feed's changes after cursor, a page
// at a time, each page's with the cursor's move in one transaction.
func (d *Dispatcher) fanOut(ctx context.Context, app string, cfg *appconfig.Config, cursor int64, now time.Time) error {
	for {
		p, err := d.cfg.Store.ListChanges(ctx, memorydriver.ChangeQuery{App: app, After: cursor, Limit: memorybank.MaxChangesPerRead})
		if err != nil {
			return err
		}
		to := p.Last
		if len(p.Changes) == memorybank.MaxChangesPerRead {
			to = p.Changes[len(p.Changes)-1].Cursor
		}
		if to <= cursor {
			return nil
		}
		var ds []*memorytype.Delivery
		for _, c := range p.Changes {
			event := c.Event
			if !c.IsEvent() {
				event = memorytype.EventOfAction(c.Action)
			}
			for _, w := range cfg.Webhooks {
				if !w.Wants(event) || c.Time.Before(w.CreateTime) {
					continue
				}
				ds = append(ds, &memorytype.Delivery{
					App: app, ID: memorytype.DeliveryID(c.Cursor, w.URL), Cursor: c.Cursor, URL: w.URL, Event: event,
					MemoryID: c.MemoryID, Revision: c.Revision, Operation: c.Operation, OpKind: c.OpKind, OpState: c.OpState,
					Scope: c.Scope, EventTime: c.Time,
					State: memorytype.DeliveryPending, NextAttempt: now, RetryFrom: now, CreateTime: now,
				})
			}
		}
		if err := d.cfg.Store.AddDeliveries(ctx, app, d.cfg.Owner, now, cursor, to, ds); err != nil {
			return err
		}
		cursor = to
	}
}

// maxPendingRead is how many pending deliveries a round reads.
const maxPendingRead = 1000

// send sends the due heads of the app's pending deliveries, at most
// InFlightPerApp at once, within the lease that ends at leaseEnd, and
// returns how long until the next is due.
func (d *Dispatcher) send(ctx context.Context, app string, cfg *appconfig.Config, leaseEnd time.Time) (time.Duration, error) {
	d.forget(app, cfg)
	pending, err := d.cfg.Store.PendingDeliveries(ctx, app, maxPendingRead)
	if err != nil {
		return 0, err
	}
	if len(pending) == 0 {
		return Idle, nil
	}
	now := d.now()
	next := d.cfg.PollInterval
	heads := map[[2]string]bool{}
	var due []*memorytype.Delivery
	for _, dl := range pending {
		key := [2]string{dl.URL, dl.MemoryID}
		if dl.MemoryID == "" {
			key[1] = "event " + dl.ID // an event of no memory waits for none
		}
		if heads[key] {
			continue // a later change of a memory waits for the one before
		}
		heads[key] = true
		if wait := dl.NextAttempt.Sub(now); wait > 0 && !d.recoveredSince(app, dl) {
			next = min(next, wait)
			continue
		}
		due = append(due, dl)
	}
	sem := make(chan struct{}, d.cfg.InFlightPerApp)
	var wg sync.WaitGroup
	errs := make(chan error, len(due))
	// The first may end up to the lease's end, so that a round makes
	// progress (its timeout is at most half the lease); the others, three
	// quarters of the lease.
	end := leaseEnd
	for i, dl := range due {
		sem <- struct{}{}
		if d.now().Add(d.cfg.AttemptTimeout).After(end) {
			<-sem
			break // the next round, with its lease renewed, sends the rest
		}
		if i == 0 {
			end = leaseEnd.Add(-d.cfg.Lease / 4)
		}
		early := dl.NextAttempt.After(now)
		wg.Go(func() {
			defer func() { <-sem }()
			if err := d.attempt(ctx, cfg, dl, early); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if len(due) > 0 {
		next = 0 // what the sent ones held back may be due now
	}
	return next, <-errs
}

// attempt sends one delivery and records the attempt; early says it was
// brought forward by its webhook's recovery.
func (d *Dispatcher) attempt(ctx context.Context, cfg *appconfig.Config, dl *memorytype.Delivery, early bool) error {
	var hook *appconfig.Webhook
	for i := range cfg.Webhooks {
		if cfg.Webhooks[i].URL == dl.URL {
			hook = &cfg.Webhooks[i]
		}
	}
	if hook == nil {
		return d.skip(ctx, dl, "the webhook was removed from the configuration")
	}
	body, err := d.payload(ctx, dl, hook)
	if fault.Is(err, fault.NotFound) && dl.MemoryID != "" {
		return d.skip(ctx, dl, "the memory's revision is gone (its user was erased)")
	}
	if err != nil {
		return err
	}
	start := d.now()
	status, sendErr := d.post(ctx, hook, dl, body, start)
	if ctx.Err() != nil {
		return nil // stopping: the delivery stays pending, sent again later
	}
	a := memorytype.DeliveryAttempt{Time: start, Status: status, Duration: d.now().Sub(start)}
	if sendErr != nil {
		a.Error = sendErr.Error()
	}
	dl.Attempts = append(dl.Attempts, a)
	if len(dl.Attempts) > memorybank.MaxKeptAttempts {
		dl.Attempts = dl.Attempts[len(dl.Attempts)-memorybank.MaxKeptAttempts:]
	}
	dl.AttemptCount++
	d.answered(dl.App, dl.URL, start, sendErr == nil, early)
	switch {
	case sendErr == nil:
		dl.State = memorytype.DeliveryDelivered
	case d.now().Sub(dl.RetryFrom) >= d.cfg.RetryWindow:
		dl.State = memorytype.DeliveryDeadLettered
		d.log.Warn("webhooks: a delivery was dead-lettered", "delivery", dl.Name(), "url", dl.URL, "attempts", dl.AttemptCount, "err", sendErr)
	default:
		dl.NextAttempt = d.now().Add(d.backoff(dl.AttemptCount))
	}
	return d.cfg.Store.PutDelivery(ctx, dl)
}

// answered records the outcome of an attempt made at t to an app's
// webhook: a success after a failure is a recovery; a failure of an
// attempt brought forward is not the webhook failing.
func (d *Dispatcher) answered(app, url string, t time.Time, ok, early bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.health[app] == nil {
		d.health[app] = map[string]*health{}
	}
	h := d.health[app][url]
	if h == nil {
		h = &health{}
		d.health[app][url] = h
	}
	switch {
	case ok && h.failing:
		h.failing, h.recovered = false, t
	case !ok && !early:
		h.failing = true
	}
}

// recoveredSince reports whether a pending delivery not yet due goes now:
// its webhook recovered after the delivery's last attempt.
func (d *Dispatcher) recoveredSince(app string, dl *memorytype.Delivery) bool {
	if len(dl.Attempts) == 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.health[app][dl.URL]
	return h != nil && dl.Attempts[len(dl.Attempts)-1].Time.Before(h.recovered)
}

// forget drops what was seen of an app's webhooks that its configuration
// no longer has.
func (d *Dispatcher) forget(app string, cfg *appconfig.Config) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for url := range d.health[app] {
		if !slices.ContainsFunc(cfg.Webhooks, func(w appconfig.Webhook) bool { return w.URL == url }) {
			delete(d.health[app], url)
		}
	}
	if len(d.health[app]) == 0 {
		delete(d.health, app)
	}
}

// backoff is the wait before the retry after n attempts: full jitter over
// backoffCeiling.
func (d *Dispatcher) backoff(n int) time.Duration {
	return time.Duration(rand.Uint64N(uint64(backoffCeiling(d.cfg.BaseDelay, d.cfg.MaxDelay, n)) + 1))
}

// backoffCeiling is min(maxDelay, base*2^(n-1)), the doubling stopped at
// maxDelay before it could overflow: a delivery retried for 24 hours
// makes more attempts than base (1s) doubles in an int64 of nanoseconds.
func backoffCeiling(base, maxDelay time.Duration, n int) time.Duration {
	shift := max(n-1, 0)
	if shift >= 63 || base > maxDelay>>shift {
		return maxDelay
	}
	return base << shift
}

func (d *Dispatcher) skip(ctx context.Context, dl *memorytype.Delivery, why string) error {
	dl.State = memorytype.DeliverySkipped
	dl.Attempts = append(dl.Attempts, memorytype.DeliveryAttempt{Time: d.now(), Error: "not sent: " + why})
	return d.cfg.Store.PutDelivery(ctx, dl)
}

// post sends body to the webhook, signed, and reads a bounded answer. It
// returns the status and, unless it was 2xx, why the attempt failed.
func (d *Dispatcher) post(ctx context.Context, hook *appconfig.Webhook, dl *memorytype.Delivery, body []byte, at time.Time) (int, error) {
	key, err := memorybank.WebhookSecretKey(hook.Secret)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	id, ts := dl.MessageID(), strconv.FormatInt(at.Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "kioku-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", Sign(key, id, ts, body))
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("no answer within %v", d.cfg.AttemptTimeout)
		}
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, d.cfg.MaxAnswerBytes))
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// Sign returns the webhook-signature header of a message: "v1," and the
// base64 of HMAC-SHA256(key, "{id}.{timestamp}.{body}").
func Sign(key []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.", id, timestamp)
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Event is a webhook's JSON body.
type Event struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is an event's data. A memory event's is the memory's name,
// and with the fact (include_fact, the default) the memory as the
// revision recorded it. An operation.done's is the operation's name, kind
// and final state (SUCCEEDED, FAILED or CANCELLED); a user.erased's is
// the scope {"user_id": ...} of the user erased, with no name.
type EventData struct {
	// Name is the memory's or the operation's resource name.
	Name      string            `json:"name,omitempty"`
	Kind      string            `json:"kind,omitempty"`
	State     string            `json:"state,omitempty"`
	Revision  int64             `json:"revision,omitempty"`
	Scope     map[string]string `json:"scope,omitempty"`
	Fact      string            `json:"fact,omitempty"`
	Topics    []string          `json:"topics,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Operation string            `json:"operation,omitempty"`
}

// payload builds a delivery's body from the revision it reports: the
// fact as stored, after the app's PII redaction.
func (d *Dispatcher) payload(ctx context.Context, dl *memorytype.Delivery, hook *appconfig.Webhook) ([]byte, error) {
	ev := Event{Type: dl.Event, Timestamp: dl.EventTime.UTC()}
	switch dl.Event {
	case memorytype.EventOperationDone:
		ev.Data = EventData{Name: dl.Operation, Kind: dl.OpKind, State: dl.OpState}
		return json.Marshal(ev)
	case memorytype.EventUserErased:
		ev.Data = EventData{Scope: dl.Scope}
		return json.Marshal(ev)
	}
	ev.Data = EventData{Name: resource.MemoryName(dl.App, dl.MemoryID)}
	rev, err := d.cfg.Store.GetRevision(ctx, dl.App, dl.MemoryID, dl.Revision)
	if err != nil {
		return nil, err
	}
	if !hook.OmitFact {
		ev.Data.Revision, ev.Data.Scope, ev.Data.Fact, ev.Data.Topics = rev.Number, rev.Scope, rev.Fact, rev.Topics
		ev.Data.Operation = rev.Operation
		if len(rev.Metadata) > 0 {
			ev.Data.Metadata = rev.Metadata.Strings()
		}
	}
	return json.Marshal(ev)
}
