package sqlite

import (
	"strconv"

	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Encryption at rest. In a database encrypted with a key (sqlitedb's
// UseEncryption) the store seals, each bound to its row:
//
//	events.body               (app, session, seq)
//	sessions.state            (app, session)
//	sessions.initial_state    (app, session)
//	user_state.state          (app, user)
//	app_state.state           (app)
//
// and the search index holds keyed hashes of terms and tags instead of
// the terms (seal.Keyring.TermHasher), so that searches still match them.
// Ids (apps, users, sessions, events), display names and labels stay as
// they are: they key rows, and listings filter on them in SQL.

// eventAt is the place of an event's body.
func eventAt(app, session string, seq int64) seal.Where {
	return seal.At("events.body", app, session, strconv.FormatInt(seq, 10))
}

// The places of the state columns.
func sessionStateAt(app, id string) seal.Where { return seal.At("sessions.state", app, id) }
func initialStateAt(app, id string) seal.Where { return seal.At("sessions.initial_state", app, id) }
func userStateAt(app, user string) seal.Where  { return seal.At("user_state.state", app, user) }
func appStateAt(app string) seal.Where         { return seal.At("app_state.state", app) }

// decodeEvent opens and decodes a stored body and sets its sequence.
func decodeEvent(k *seal.Keyring, app, session string, seq int64, body []byte) (*sessiontype.Event, error) {
	body, err := k.Open(app, eventAt(app, session, seq), body)
	if err != nil {
		return nil, err
	}
	e, err := sessiondriver.UnmarshalEvent(body)
	if err != nil {
		return nil, err
	}
	e.Sequence = seq
	return e, nil
}

// decodeState opens and decodes a stored state; no row (raw empty) is the
// empty state.
func decodeState(k *seal.Keyring, app string, at seal.Where, raw []byte) (map[string]any, error) {
	if len(raw) > 0 {
		var err error
		if raw, err = k.Open(app, at, raw); err != nil {
			return nil, err
		}
	}
	return sessiondriver.DecodeState(raw)
}

// termHashers gives each app's search term hasher (the identity in a
// database without a key), made once for a pass over many events.
type termHashers struct {
	k    *seal.Keyring
	apps map[string]func(string) string
}

func newTermHashers(k *seal.Keyring) *termHashers {
	return &termHashers{k: k, apps: map[string]func(string) string{}}
}

// of returns the hasher of app.
func (h *termHashers) of(app string) (func(string) string, error) {
	if f := h.apps[app]; f != nil {
		return f, nil
	}
	f, err := h.k.TermHasher(app)
	if err != nil {
		return nil, err
	}
	h.apps[app] = f
	return f, nil
}
