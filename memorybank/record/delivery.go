package record

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// deliveryRecord is the stored form of a memorytype.Delivery, without its
// app and id (the row's or document's key): times in Unix nanoseconds,
// the state by name.
type deliveryRecord struct {
	Cursor       int64            `json:"cursor"`
	URL          string           `json:"url"`
	Event        string           `json:"event"`
	MemoryID     string           `json:"memory_id,omitempty"`
	Revision     int64            `json:"revision,omitempty"`
	Operation    string           `json:"operation,omitempty"`
	OpKind       string           `json:"op_kind,omitempty"`
	OpState      string           `json:"op_state,omitempty"`
	Scope        memorytype.Scope `json:"scope,omitempty"`
	EventNS      int64            `json:"event_ns"`
	State        string           `json:"state"`
	NextNS       int64            `json:"next_ns,omitempty"`
	RetryFromNS  int64            `json:"retry_from_ns,omitempty"`
	Attempts     []attemptRecord  `json:"attempts,omitempty"`
	AttemptCount int              `json:"attempt_count,omitempty"`
	CreateNS     int64            `json:"create_ns"`
}

type attemptRecord struct {
	TimeNS     int64  `json:"time_ns"`
	Status     int    `json:"status,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationNS int64  `json:"duration_ns"`
}

// MarshalDelivery returns a delivery's stored form.
func MarshalDelivery(d *memorytype.Delivery) ([]byte, error) {
	r := deliveryRecord{
		Cursor: d.Cursor, URL: d.URL, Event: d.Event, MemoryID: d.MemoryID, Revision: d.Revision, Operation: d.Operation,
		OpKind: d.OpKind, OpState: d.OpState,
		Scope: d.Scope, EventNS: unixnano.From(d.EventTime), State: d.State.String(), NextNS: unixnano.From(d.NextAttempt), RetryFromNS: unixnano.From(d.RetryFrom),
		AttemptCount: d.AttemptCount, CreateNS: unixnano.From(d.CreateTime),
	}
	if d.State == memorytype.DeliveryUnspecified {
		return nil, fmt.Errorf("delivery %s has no state", d.Name())
	}
	for _, a := range d.Attempts {
		r.Attempts = append(r.Attempts, attemptRecord{TimeNS: unixnano.From(a.Time), Status: a.Status, Error: a.Error, DurationNS: int64(a.Duration)})
	}
	return json.Marshal(r)
}

// UnmarshalDelivery decodes what MarshalDelivery stored, for the delivery
// of an app with an id.
func UnmarshalDelivery(app, id string, body []byte) (*memorytype.Delivery, error) {
	var r deliveryRecord
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding webhook delivery %s of app %s: %w", id, app, err)
	}
	state, err := memorytype.ParseDeliveryState(r.State)
	if err != nil {
		return nil, fmt.Errorf("decoding webhook delivery %s of app %s: %w", id, app, err)
	}
	d := &memorytype.Delivery{
		App: app, ID: id, Cursor: r.Cursor, URL: r.URL, Event: r.Event, MemoryID: r.MemoryID, Revision: r.Revision,
		Operation: r.Operation, OpKind: r.OpKind, OpState: r.OpState, Scope: r.Scope, EventTime: unixnano.Time(r.EventNS), State: state,
		NextAttempt: unixnano.Time(r.NextNS), RetryFrom: unixnano.Time(r.RetryFromNS), AttemptCount: r.AttemptCount, CreateTime: unixnano.Time(r.CreateNS),
	}
	for _, a := range r.Attempts {
		d.Attempts = append(d.Attempts, memorytype.DeliveryAttempt{Time: unixnano.Time(a.TimeNS), Status: a.Status, Error: a.Error, Duration: time.Duration(a.DurationNS)})
	}
	return d, nil
}
