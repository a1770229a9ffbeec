package record

import (
	"encoding/json"
	"fmt"

	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// changeRecord is the stored form of a memorytype.ChangeRecord, without
// its app and cursor (the row's or document's key).
type changeRecord struct {
	Action    string           `json:"action"`
	MemoryID  string           `json:"memory_id"`
	Scope     memorytype.Scope `json:"scope"`
	Revision  int64            `json:"revision"`
	Operation string           `json:"operation,omitempty"`
	TimeNS    int64            `json:"time_ns"`
	Event     string           `json:"event,omitempty"`
	OpKind    string           `json:"op_kind,omitempty"`
	OpState   string           `json:"op_state,omitempty"`
}

// MarshalChange returns the stored form of a change of the feed: JSON
// with the action by name and the time in Unix nanoseconds.
func MarshalChange(c *memorytype.ChangeRecord) ([]byte, error) {
	name, ok := actionName(c.Action)
	if !ok || (c.Action == memorytype.Unchanged) != c.IsEvent() {
		return nil, fmt.Errorf("change %d of app %s: no stored action for %v", c.Cursor, c.App, c.Action)
	}
	return json.Marshal(changeRecord{
		Action: name, MemoryID: c.MemoryID, Scope: c.Scope, Revision: c.Revision,
		Operation: c.Operation, TimeNS: unixnano.From(c.Time), Event: c.Event, OpKind: c.OpKind, OpState: c.OpState,
	})
}

// UnmarshalChange decodes what MarshalChange stored, for the change of an
// app at a cursor.
func UnmarshalChange(app string, cursor int64, body []byte) (*memorytype.ChangeRecord, error) {
	var r changeRecord
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding change %d of app %s: %w", cursor, app, err)
	}
	action, err := parseAction(r.Action)
	if err != nil {
		return nil, fmt.Errorf("decoding change %d of app %s: %w", cursor, app, err)
	}
	return &memorytype.ChangeRecord{
		App: app, Cursor: cursor, Action: action, MemoryID: r.MemoryID, Scope: r.Scope,
		Revision: r.Revision, Operation: r.Operation, Time: unixnano.Time(r.TimeNS),
		Event: r.Event, OpKind: r.OpKind, OpState: r.OpState,
	}, nil
}
