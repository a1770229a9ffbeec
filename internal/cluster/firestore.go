package cluster

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/internal/firestoredb"
)

// membersCollection holds one document per member, named by its id.
const membersCollection = "kioku_members"

// Firestore is a Registry in a Firestore database: one document per
// member in the collection kioku_members. A beat reads the collection and
// writes one document in one transaction (its reads lock what they read),
// so a database with N servers takes N writes and N queries of N
// documents every interval, whatever the calls. The record of a server
// that stopped without leaving is deleted by the first beat after it
// expires.
type Firestore struct {
	c *firestore.Client
}

// NewFirestore returns the registry of the servers on c's database.
func NewFirestore(c *firestore.Client) *Firestore { return &Firestore{c: c} }

type memberDoc struct {
	Fraction float64   `firestore:"fraction"`
	Expires  time.Time `firestore:"expires"`
}

// Beat implements Registry.
func (f *Firestore) Beat(ctx context.Context, self string, now time.Time, decide func([]Member) Member) error {
	col := f.c.Collection(membersCollection)
	err := f.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		// Every record, expired ones too: a few documents, and a query
		// on expires alone would not lock the records it skips.
		snaps, err := tx.Documents(col).GetAll()
		if err != nil {
			return err
		}
		var others []Member
		for _, s := range snaps {
			var d memberDoc
			if err := s.DataTo(&d); err != nil {
				return err
			}
			if s.Ref.ID == self {
				continue
			}
			if !now.Before(d.Expires) {
				// A server that stopped without leaving: it no longer
				// counts, and its record goes.
				if err := tx.Delete(s.Ref); err != nil {
					return err
				}
				continue
			}
			others = append(others, Member{ID: s.Ref.ID, Fraction: d.Fraction, Expires: d.Expires})
		}
		m := decide(others)
		return tx.Set(col.Doc(self), memberDoc{Fraction: m.Fraction, Expires: m.Expires})
	})
	return firestoredb.Wrap(err)
}

// Leave implements Registry.
func (f *Firestore) Leave(ctx context.Context, id string) error {
	_, err := f.c.Collection(membersCollection).Doc(id).Delete(ctx)
	return firestoredb.Wrap(err)
}
