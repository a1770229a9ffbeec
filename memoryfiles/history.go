package memoryfiles

// settle brings a command's Write to account for history (Usage.History:
// the content of the revisions kept and of the deleted files kept) and,
// when that would pass MaxHistoryBytes, removes the oldest history
// instead of refusing the command:
//
//  1. the deleted files, the earliest deleted first, each with its
//     revisions (Write.Purge);
//  2. the older revisions of the files the command changes, the oldest
//     first (Write.Drop), each file keeping its newest;
//  3. the older revisions of the user's other files, in path order,
//     each file keeping its newest.
//
// That always fits: a file's newest revision holds at most its content
// (nothing, for a rename or a deletion), so what is left is at most the
// content of the files before or after the command (the files it
// deletes keep theirs), within MaxUserBytes, which is not more than
// MaxHistoryBytes.
func (x *exec) settle(w *Write) error {
	gone, changed, err := x.account(w)
	h := &w.Usage.History
	if err != nil || *h <= MaxHistoryBytes {
		return err
	}
	if err := x.purgeDeleted(w, gone); err != nil || *h <= MaxHistoryBytes {
		return err
	}
	for _, c := range w.Files {
		if err := x.dropOlder(w, c.File.ID, changed[c.File.ID]); err != nil || *h <= MaxHistoryBytes {
			return err
		}
	}
	q := ListQuery{App: x.app, User: x.user, Dir: Root, Limit: 200}
	for {
		page, err := x.store.ListFiles(x.ctx, q)
		if err != nil {
			return err
		}
		for _, f := range page {
			if _, ok := changed[f.ID]; ok || gone[f.ID] {
				continue
			}
			if err := x.dropOlder(w, f.ID, 0); err != nil || *h <= MaxHistoryBytes {
				return err
			}
		}
		if len(page) < q.Limit {
			return nil
		}
		q.AfterPath, q.AfterID = page[len(page)-1].Path, page[len(page)-1].ID
	}
}

// account brings w.Usage.History up to date with what w writes and
// removes, and returns the files w purges and those it changes, with
// their new revision's number.
func (x *exec) account(w *Write) (gone map[string]bool, changed map[string]int64, err error) {
	h := &w.Usage.History
	gone, changed = map[string]bool{}, map[string]int64{}
	for _, f := range w.Purge {
		b, _, err := x.history(f.ID, 0)
		if err != nil {
			return nil, nil, err
		}
		*h -= b
		if f.Deleted { // deleted before: its content was history
			*h -= f.Size
		}
		gone[f.ID] = true
	}
	for _, r := range w.Revisions {
		changed[r.FileID] = r.Number
		*h += int64(len(r.Content))
		if r.Action == Deleted {
			*h += r.Size
		}
		// The store removes the revision that falls out of the kept ones.
		if old := r.Number - MaxRevisions; old > 0 {
			revs, err := x.store.ListRevisions(x.ctx, x.app, x.user, r.FileID, old+1, 1)
			if err != nil {
				return nil, nil, err
			}
			if len(revs) == 1 && revs[0].Number == old {
				*h -= int64(len(revs[0].Content))
			}
		}
	}
	return gone, changed, nil
}

// purgeDeleted purges the user's deleted files, the earliest deleted
// first, until the history fits; gone are the files purged already.
func (x *exec) purgeDeleted(w *Write, gone map[string]bool) error {
	deleted, err := x.store.OldestDeleted(x.ctx, x.app, x.user, MaxDeletedFiles)
	if err != nil {
		return err
	}
	for _, f := range deleted {
		if w.Usage.History <= MaxHistoryBytes {
			return nil
		}
		if gone[f.ID] {
			continue
		}
		b, _, err := x.history(f.ID, 0)
		if err != nil {
			return err
		}
		w.Purge = append(w.Purge, f)
		w.Usage.Deleted--
		w.Usage.History -= b + f.Size
		gone[f.ID] = true
	}
	return nil
}

// dropOlder drops a file's stored revisions, the oldest first, until the
// history fits. newest is the revision the Write adds to the file (0:
// none), which stays; without one, the newest stored revision stays.
func (x *exec) dropOlder(w *Write, id string, newest int64) error {
	_, revs, err := x.history(id, newest)
	if err != nil {
		return err
	}
	if newest == 0 && len(revs) > 0 {
		revs = revs[1:] // the newest stays
	}
	for i := len(revs) - 1; i >= 0 && w.Usage.History > MaxHistoryBytes; i-- {
		w.Drop = append(w.Drop, revs[i])
		w.Usage.History -= int64(len(revs[i].Content))
	}
	return nil
}

// history returns a file's stored revisions, newest first, and the bytes
// of their content. With newest (a revision a Write adds), only those the
// store keeps beside it: the store removes revision newest-MaxRevisions.
func (x *exec) history(id string, newest int64) (int64, []*Revision, error) {
	revs, err := x.store.ListRevisions(x.ctx, x.app, x.user, id, 0, MaxRevisions)
	if err != nil {
		return 0, nil, err
	}
	var b int64
	kept := revs[:0]
	for _, r := range revs {
		if newest > 0 && r.Number <= newest-MaxRevisions {
			continue
		}
		kept = append(kept, r)
		b += int64(len(r.Content))
	}
	return b, kept, nil
}
