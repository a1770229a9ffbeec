package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

func readState(snap *firestore.DocumentSnapshot, err error) (map[string]any, int64, error) {
	if firestoredb.IsNotFound(err) || err == nil && !snap.Exists() {
		return map[string]any{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var d stateDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, 0, err
	}
	st, err := sessiondriver.DecodeState([]byte(d.State))
	return st, d.UpdateNS, err
}

// sharedWrites reads the user and app state documents a change touches (in
// the transaction, before any write) and returns the function that writes
// them. Untouched scopes are not read.
func (s *Store) sharedWrites(tx *firestore.Transaction, app, user string, userDelta, appDelta map[string]any, now time.Time, max int) (func() error, error) {
	type pending struct {
		ref   *firestore.DocumentRef
		state []byte
	}
	var out []pending
	for _, scope := range []struct {
		name  string
		ref   *firestore.DocumentRef
		delta map[string]any
	}{
		{"user", s.userRef(app, user), userDelta},
		{"app", s.appStateRef(app), appDelta},
	} {
		if len(scope.delta) == 0 {
			continue
		}
		old, _, err := readState(tx.Get(scope.ref))
		if err != nil {
			return nil, err
		}
		_, enc, err := sessiondriver.UpdatedState(old, scope.delta, scope.name, max)
		if err != nil {
			return nil, err
		}
		out = append(out, pending{scope.ref, enc})
	}
	return func() error {
		for _, p := range out {
			if err := tx.Set(p.ref, stateDoc{State: string(p.state), UpdateNS: unixnano.From(now)}); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// GetState implements sessiondriver.Store.
func (s *Store) GetState(ctx context.Context, ref sessiontype.StateRef) (map[string]any, time.Time, error) {
	doc := s.appStateRef(ref.App)
	if ref.User != "" {
		doc = s.userRef(ref.App, ref.User)
	}
	st, updateNS, err := readState(doc.Get(ctx))
	return st, unixnano.Time(updateNS), firestoredb.Wrap(err)
}

// UpdateState implements sessiondriver.Store.
func (s *Store) UpdateState(ctx context.Context, r *sessiondriver.UpdateStateParams) (map[string]any, time.Time, error) {
	var st map[string]any
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		doc, name := s.appStateRef(r.Ref.App), "app"
		if r.Ref.User != "" {
			doc, name = s.userRef(r.Ref.App, r.Ref.User), "user"
		}
		old, _, err := readState(tx.Get(doc))
		if err != nil {
			return err
		}
		var enc []byte
		if st, enc, err = sessiondriver.UpdatedState(old, r.Delta, name, r.MaxStateBytes); err != nil {
			return err
		}
		return tx.Set(doc, stateDoc{State: string(enc), UpdateNS: unixnano.From(r.Now)})
	}, s.txn...)
	if err != nil {
		return nil, time.Time{}, firestoredb.Wrap(err)
	}
	return st, r.Now.UTC(), nil
}
