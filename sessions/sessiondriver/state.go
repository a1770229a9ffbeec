package sessiondriver

import (
	"encoding/json"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// EncodeState returns the stored encoding of a scope's state: its JSON,
// "{}" when empty. Its length is what MaxStateBytes bounds.
func EncodeState(state map[string]any) ([]byte, error) {
	if len(state) == 0 {
		return []byte("{}"), nil
	}
	return json.Marshal(state)
}

// DecodeState decodes a scope's state stored with EncodeState; empty input
// is the empty state.
func DecodeState(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return map[string]any{}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// UpdatedState applies delta to a scope's state (sessiontype.ApplyDelta)
// and encodes the result (EncodeState); an encoding over max bytes is
// ResourceExhausted, naming the scope ("session", "user", "app"). Every
// write of a state goes through it, so that every store refuses the same
// states with the same message.
func UpdatedState(old, delta map[string]any, scope string, max int) (map[string]any, []byte, error) {
	st := sessiontype.ApplyDelta(old, delta)
	enc, err := EncodeState(st)
	if err != nil {
		return nil, nil, err
	}
	if len(enc) > max {
		return nil, nil, fault.New(fault.ResourceExhausted, "%s state would be %d bytes; the limit is %d bytes (MaxStateBytes)", scope, len(enc), max)
	}
	return st, enc, nil
}
