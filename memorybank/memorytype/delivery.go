package memorytype

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/kioku-ai/kioku/internal/enumname"
	"github.com/kioku-ai/kioku/resource"
)

// DeliveryState is the state of a webhook delivery.
type DeliveryState int

var deliveryStateNames = map[DeliveryState]string{
	DeliveryPending: "PENDING", DeliveryDelivered: "DELIVERED", DeliveryDeadLettered: "DEAD_LETTERED", DeliverySkipped: "SKIPPED",
}

// String returns the state's stored name.
func (s DeliveryState) String() string {
	return enumname.String(deliveryStateNames, s, "UNSPECIFIED")
}

// ParseDeliveryState returns the state of a stored name.
func ParseDeliveryState(name string) (DeliveryState, error) {
	return enumname.Parse(deliveryStateNames, name, "delivery state")
}

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
