package cluster

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kioku-ai/kioku/internal/firestoredb"
)

// membersCollection holds one document per member, named by its id.
const membersCollection = "kioku_members"

// Firestore is a Registry in a Firestore database: one document per
// member in the collection kioku_members. A beat reads the collection and
// writes its own document, outside any transaction, so beats never lock
// and never wait on each other: a database with N servers takes N writes
// and N queries of N documents every interval (one more query for a
// member that raises its claim), whatever the calls. The record of a
// server that stopped without leaving is deleted by the first read after
// it expires, with a precondition on its update time.
type Firestore struct {
	c *firestore.Client
}

// NewFirestore returns the registry of the servers on c's database.
func NewFirestore(c *firestore.Client) *Firestore { return &Firestore{c: c} }

type memberDoc struct {
	Fraction float64   `firestore:"fraction"`
	Expires  time.Time `firestore:"expires"`
}

// Others implements Registry. Firestore's queries are strongly
// consistent: they see every write that finished before them.
func (f *Firestore) Others(ctx context.Context, self string, now time.Time) ([]Member, error) {
	// Every record, expired ones too: a few documents, and the expired
	// ones go.
	snaps, err := f.c.Collection(membersCollection).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	var others []Member
	for _, s := range snaps {
		var d memberDoc
		if err := s.DataTo(&d); err != nil {
			return nil, err
		}
		if s.Ref.ID == self {
			continue
		}
		if !now.Before(d.Expires) {
			// A server that stopped without leaving: it no longer counts,
			// and its record goes unless it was renewed since.
			_, err := s.Ref.Delete(ctx, firestore.LastUpdateTime(s.UpdateTime))
			switch status.Code(err) {
			case codes.OK, codes.NotFound, codes.FailedPrecondition:
				// Gone, or renewed since: a read after its renewal counts it.
			default:
				return nil, firestoredb.Wrap(err)
			}
			continue
		}
		others = append(others, Member{ID: s.Ref.ID, Fraction: d.Fraction, Expires: d.Expires})
	}
	return others, nil
}

// Put implements Registry.
func (f *Firestore) Put(ctx context.Context, m Member) error {
	_, err := f.c.Collection(membersCollection).Doc(m.ID).Set(ctx, memberDoc{Fraction: m.Fraction, Expires: m.Expires})
	return firestoredb.Wrap(err)
}

// Leave implements Registry.
func (f *Firestore) Leave(ctx context.Context, id string) error {
	_, err := f.c.Collection(membersCollection).Doc(id).Delete(ctx)
	return firestoredb.Wrap(err)
}
