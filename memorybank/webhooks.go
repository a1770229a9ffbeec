package memorybank

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/resource"
)

// The webhook event types (appconfig.Webhook.Events).
const (
	EventMemoryCreated = "memory.created"
	EventMemoryUpdated = "memory.updated"
	EventMemoryDeleted = "memory.deleted"
	EventOperationDone = "operation.done"
	EventUserErased    = "user.erased"
)

// EventTypes are the webhook event types, in the API's order.
var EventTypes = []string{EventMemoryCreated, EventMemoryUpdated, EventMemoryDeleted, EventOperationDone, EventUserErased}

// Webhook limits.
const (
	MaxWebhooks      = 8
	MaxWebhookURL    = 2048
	webhookSecretPre = "whsec_"
	// webhookSecretBytes is the size of a generated secret; a given one
	// may have 24 to 64 bytes.
	webhookSecretBytes = 32
)

// EventOfAction returns the webhook event type of a change's action.
func EventOfAction(a Action) string {
	switch a {
	case Created:
		return EventMemoryCreated
	case Deleted:
		return EventMemoryDeleted
	}
	return EventMemoryUpdated
}

// WebhookSecretKey returns the HMAC key of a "whsec_" secret: the bytes
// its base64 holds.
func WebhookSecretKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, webhookSecretPre)
	if !ok {
		return nil, fault.InvalidField("webhooks.secret", "a webhook secret must start with %q", webhookSecretPre)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fault.InvalidField("webhooks.secret", "a webhook secret is %q and standard base64: %v", webhookSecretPre, err)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fault.InvalidField("webhooks.secret", "a webhook secret holds 24 to 64 bytes, not %d", len(key))
	}
	return key, nil
}

// newWebhookSecret returns a random secret.
func newWebhookSecret() string {
	b := make([]byte, webhookSecretBytes)
	rand.Read(b)
	return webhookSecretPre + base64.StdEncoding.EncodeToString(b)
}

// prepareWebhooks gives each webhook of next the create time of cur's
// webhook of the same URL (now for a new URL) and, when it has no secret,
// that webhook's secret or a new one (SecretGenerated), so that a
// configuration read back (secrets empty) and written again keeps them.
func prepareWebhooks(cur, next []appconfig.Webhook, now time.Time) []appconfig.Webhook {
	out := make([]appconfig.Webhook, len(next))
	for i, w := range next {
		w.Events = slices.Clone(w.Events)
		w.SecretGenerated = false
		w.CreateTime = now
		j := slices.IndexFunc(cur, func(c appconfig.Webhook) bool { return c.URL == w.URL })
		if j >= 0 {
			w.CreateTime = cur[j].CreateTime
		}
		if w.Secret == "" {
			if j >= 0 {
				w.Secret = cur[j].Secret
			} else {
				w.Secret, w.SecretGenerated = newWebhookSecret(), true
			}
		}
		out[i] = w
	}
	return out
}

// validateWebhooks checks an app's webhooks: https URLs (http to a
// loopback address when allowed), known event types, valid secrets.
func validateWebhooks(ws []appconfig.Webhook, allowLoopbackHTTP bool) error {
	if len(ws) > MaxWebhooks {
		return fault.InvalidField("webhooks", "webhooks has %d endpoints; the limit is %d", len(ws), MaxWebhooks)
	}
	seen := map[string]bool{}
	for i, w := range ws {
		field := fmt.Sprintf("webhooks[%d]", i)
		if err := validateWebhookURL(field+".url", w.URL, allowLoopbackHTTP); err != nil {
			return err
		}
		if seen[w.URL] {
			return fault.InvalidField(field+".url", "%s: url %q is given twice", field, w.URL)
		}
		seen[w.URL] = true
		if len(w.Events) == 0 {
			return fault.InvalidField(field+".events", "%s.events is empty: name at least one of %v", field, EventTypes)
		}
		for _, e := range w.Events {
			if !slices.Contains(EventTypes, e) {
				return fault.InvalidField(field+".events", "%s.events: %q is not an event type (%v)", field, e, EventTypes)
			}
		}
		if _, err := WebhookSecretKey(w.Secret); err != nil {
			return fault.InvalidField(field+".secret", "%s.secret: %v", field, err)
		}
	}
	return nil
}

func validateWebhookURL(field, raw string, allowLoopbackHTTP bool) error {
	if raw == "" || len(raw) > MaxWebhookURL {
		return fault.InvalidField(field, "%s must be 1 to %d bytes", field, MaxWebhookURL)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fault.InvalidField(field, "%s %q is not an absolute URL with a host (and no user or fragment)", field, raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		ip := net.ParseIP(u.Hostname())
		if ip == nil || !ip.IsLoopback() {
			return fault.InvalidField(field, "%s %q: http is allowed only to a loopback address (127.0.0.1, ::1); use https", field, raw)
		}
		if !allowLoopbackHTTP {
			return fault.InvalidField(field, "%s %q: http to loopback needs the server's --webhooks-allow-loopback-http; use https", field, raw)
		}
		return nil
	}
	return fault.InvalidField(field, "%s %q: the scheme must be https", field, raw)
}

// DeliveryState is the state of a webhook delivery.
type DeliveryState int

// The states of a delivery.
const (
	DeliveryUnspecified DeliveryState = iota
	// DeliveryPending waits for its first attempt or a retry.
	DeliveryPending
	// DeliveryDelivered was answered 2xx.
	DeliveryDelivered
	// DeliveryDeadLettered was retried for the whole window and given up.
	DeliveryDeadLettered
	// DeliverySkipped was not sent: what it was about is gone (erased).
	DeliverySkipped
)

var deliveryStateNames = map[DeliveryState]string{
	DeliveryPending: "PENDING", DeliveryDelivered: "DELIVERED", DeliveryDeadLettered: "DEAD_LETTERED", DeliverySkipped: "SKIPPED",
}

// String returns the state's stored name.
func (s DeliveryState) String() string {
	if n, ok := deliveryStateNames[s]; ok {
		return n
	}
	return "UNSPECIFIED"
}

// ParseDeliveryState returns the state of a stored name.
func ParseDeliveryState(name string) (DeliveryState, error) {
	for s, n := range deliveryStateNames {
		if n == name {
			return s, nil
		}
	}
	return DeliveryUnspecified, fmt.Errorf("unknown delivery state %q", name)
}

// MaxKeptAttempts is how many attempts a delivery keeps (the last ones);
// Delivery.AttemptCount counts them all.
const MaxKeptAttempts = 20

// Delivery is one event sent to one webhook of an app.
type Delivery struct {
	App string
	// ID is the event's cursor in the change feed (20 digits) and the
	// webhook's URL key: deliveries sort in event order.
	ID string
	// Cursor is the event's cursor in the app's change feed.
	Cursor int64
	// URL is the webhook's.
	URL   string
	Event string
	// MemoryID, Revision and Operation are the change's.
	MemoryID  string
	Revision  int64
	Operation string
	Scope     Scope
	EventTime time.Time
	State     DeliveryState
	// NextAttempt is when a pending delivery is due.
	NextAttempt time.Time
	// RetryFrom starts the retry window: the delivery's creation, or its
	// last Redeliver.
	RetryFrom time.Time
	// Attempts are the last MaxKeptAttempts, oldest first.
	Attempts     []DeliveryAttempt
	AttemptCount int
	CreateTime   time.Time

	// OpKind and OpState are an operation.done's operation's kind and
	// final state (ChangeRecord's).
	OpKind, OpState string
}

// DeliveryAttempt is one POST of a delivery.
type DeliveryAttempt struct {
	Time time.Time
	// Status is the HTTP status (0: no answer).
	Status   int
	Error    string
	Duration time.Duration
}

// Name returns the delivery's resource name.
func (d *Delivery) Name() string { return DeliveryName(d.App, d.ID) }

// MessageID returns the event's webhook-id: the same for every webhook and
// attempt of the event, unique across the apps of a server.
func (d *Delivery) MessageID() string { return fmt.Sprintf("msg_%s_%d", d.App, d.Cursor) }

// DeliveryName returns "apps/{app}/webhookDeliveries/{id}".
func DeliveryName(app, id string) string { return resource.WebhookDelivery.Build(app, id) }

// DeliveryID returns the id of the delivery of the event at a cursor to
// a URL.
func DeliveryID(cursor int64, rawURL string) string {
	h := sha256.Sum256([]byte(rawURL))
	return fmt.Sprintf("%020d-%s", cursor, hex.EncodeToString(h[:6]))
}

// DeliveryQuery selects deliveries for ListDeliveries.
type DeliveryQuery struct {
	App string
	// State, when set, keeps deliveries in it.
	State DeliveryState
	// BeforeID is the cursor: the id of the last delivery of the previous
	// page (deliveries come newest first); empty for the first page.
	BeforeID string
	Limit    int
}

// WebhookStore keeps an app's webhook deliveries and its dispatcher's
// state: the lease that makes one server at a time deliver the app's
// events, and the change feed's cursor up to which deliveries were made
// (the feed is the outbox: deliveries are made from it after the change
// committed, so a crash between the two loses nothing).
type WebhookStore interface {
	// ClaimWebhookLease gives the app's dispatch lease to owner until
	// expiry when no other owner holds it at now (or renews owner's); it
	// reports whether owner holds it, and the app's delivery cursor.
	ClaimWebhookLease(ctx context.Context, app, owner string, now, expiry time.Time) (held bool, cursor int64, err error)

	// AddDeliveries stores new deliveries of an app and moves its
	// delivery cursor from from to to, atomically; Aborted when the
	// cursor is not at from (another dispatcher moved it) or owner no
	// longer holds the lease at now. Deliveries already stored (by id)
	// are kept as they are.
	AddDeliveries(ctx context.Context, app, owner string, now time.Time, from, to int64, ds []*Delivery) error

	// PendingDeliveries returns up to limit pending deliveries of an app,
	// in id order (event order).
	PendingDeliveries(ctx context.Context, app string, limit int) ([]*Delivery, error)

	// PutDelivery replaces a stored delivery (NotFound when there is none).
	PutDelivery(ctx context.Context, d *Delivery) error

	// GetDelivery returns a delivery, or NotFound.
	GetDelivery(ctx context.Context, app, id string) (*Delivery, error)

	// ListDeliveries returns up to q.Limit deliveries of an app, in
	// descending id order (newest event first) before q.BeforeID.
	ListDeliveries(ctx context.Context, q DeliveryQuery) ([]*Delivery, error)

	// DeleteDeliveries deletes deliveries of an app by id (those that
	// are not stored are no error).
	DeleteDeliveries(ctx context.Context, app string, ids []string) error
}

// DeliveryRetention is how long a delivery that ended (delivered,
// dead-lettered or skipped) is kept after its last attempt (its creation
// when it had none); SweepExpired removes it then.
const DeliveryRetention = 7 * 24 * time.Hour

// deliveryPage is how many deliveries one read of deleteDeliveries takes.
const deliveryPage = 500

// deleteDeliveries deletes the deliveries of an app that gone says, a
// page at a time, and returns how many.
func (s *Service) deleteDeliveries(ctx context.Context, app string, gone func(*Delivery) bool) (int, error) {
	n := 0
	q := DeliveryQuery{App: app, Limit: deliveryPage}
	for {
		page, err := s.store.ListDeliveries(ctx, q)
		if err != nil {
			return n, err
		}
		var ids []string
		for _, d := range page {
			if gone(d) {
				ids = append(ids, d.ID)
			}
		}
		if len(ids) > 0 {
			if err := s.store.DeleteDeliveries(ctx, app, ids); err != nil {
				return n, err
			}
			n += len(ids)
		}
		if len(page) < deliveryPage {
			return n, nil
		}
		q.BeforeID = page[len(page)-1].ID
	}
}

// sweepDeliveries deletes the deliveries that ended more than
// DeliveryRetention before now, of every app with a configuration.
func (s *Service) sweepDeliveries(ctx context.Context, now time.Time) (int, error) {
	cfgs, err := s.store.ListConfigs(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, c := range cfgs {
		n, err := s.deleteDeliveries(ctx, c.App, func(d *Delivery) bool {
			last := d.CreateTime
			if k := len(d.Attempts); k > 0 {
				last = d.Attempts[k-1].Time
			}
			return d.State != DeliveryPending && now.Sub(last) > DeliveryRetention
		})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// ListDeliveries returns a page of an app's webhook deliveries, newest
// event first.
func (s *Service) ListDeliveries(ctx context.Context, app string, state DeliveryState, pageSize int32, token string) ([]*Delivery, string, error) {
	if err := validateApp(app); err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", pageSize)
	if err != nil {
		return nil, "", err
	}
	digest := aip.QueryDigest("webhookDeliveries", app, state.String())
	tok, err := aip.DecodePageToken(token, digest)
	if err != nil {
		return nil, "", err
	}
	ds, err := s.store.ListDeliveries(ctx, DeliveryQuery{App: app, State: state, BeforeID: tok.ID, Limit: size + 1})
	if err != nil {
		return nil, "", err
	}
	ds, next := aip.Page(ds, size, digest, func(last *Delivery) aip.PageToken { return aip.PageToken{ID: last.ID} })
	return ds, next, nil
}

// Redeliver makes a delivery pending again, due at once, its attempts
// kept, and wakes the app's dispatcher on this server.
func (s *Service) Redeliver(ctx context.Context, app, id string) (*Delivery, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := resource.ValidateID("delivery id", id, resource.MemoryIDChars); err != nil {
		return nil, err
	}
	d, err := s.store.GetDelivery(ctx, app, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	d.State, d.NextAttempt, d.RetryFrom = DeliveryPending, now, now
	if err := s.store.PutDelivery(ctx, d); err != nil {
		return nil, err
	}
	s.feed.Notify(app)
	return d, nil
}

// SubscribeChanges returns a channel that receives a value after each
// committed Write through this Service that changed an app's memories (or
// a Redeliver), and the function that ends the subscription.
func (s *Service) SubscribeChanges(app string) (<-chan struct{}, func()) {
	return s.feed.Subscribe(app)
}

// SubscribeConfigs returns a channel that receives a value after each
// UpdateConfig through this Service, and the function that ends the
// subscription.
func (s *Service) SubscribeConfigs() (<-chan struct{}, func()) {
	return s.configs.Subscribe(struct{}{})
}
