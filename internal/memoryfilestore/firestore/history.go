package firestore

import (
	"context"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/memoryfiles"
)

// keptHistory reports whether a usage document keeps the history field:
// those written before it was kept do not.
func keptHistory(snap *firestore.DocumentSnapshot) bool {
	if snap == nil || !snap.Exists() {
		return true // no usage: no history either
	}
	_, err := snap.DataAt("history")
	return err == nil
}

// countHistory counts a user's history as memoryfiles.Usage.History
// counts it, from the documents: the size of every deleted file and of
// every revision that holds content (CREATED, EDITED). Usage counts so
// for a usage document written before the history field was kept, until
// the user's next write stores it.
func (s *Store) countHistory(ctx context.Context, app, user string) (int64, error) {
	files, err := s.files(app, user).Select("size", "deleted").Documents(ctx).GetAll()
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	var n int64
	for _, f := range files {
		var d fileDoc
		if err := f.DataTo(&d); err != nil {
			return 0, err
		}
		if d.Deleted {
			n += d.Size
		}
		revs, err := f.Ref.Collection("kioku_revisions").Where("action", "in", []string{memoryfiles.Created.String(), memoryfiles.Edited.String()}).
			Select("size").Documents(ctx).GetAll()
		if err != nil {
			return 0, firestoredb.Wrap(err)
		}
		for _, r := range revs {
			var d revisionDoc
			if err := r.DataTo(&d); err != nil {
				return 0, err
			}
			n += d.Size
		}
	}
	return n, nil
}
