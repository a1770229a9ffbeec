package sessiondriver

import (
	"encoding/json"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// UnmarshalEvent decodes an event stored with Event.Marshal, its Size set
// to the length of b.
func UnmarshalEvent(b []byte) (*sessiontype.Event, error) {
	var e sessiontype.Event
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	e.Size = len(b)
	return &e, nil
}

// CheckCompaction checks, in the append's transaction, that a compaction
// event appended after the session's last event (last) covers only events
// before it: the service cannot, since it reads the session before the
// transaction.
func CheckCompaction(key sessiontype.Key, c *sessiontype.Compaction, last int64) error {
	if c.EndSequence > last {
		return fault.Invalidf("event.actions.compaction.end_sequence %d is beyond the last event of session %s (%d); a compaction covers events before it", c.EndSequence, key.Name(), last)
	}
	return nil
}
