package sqlite

import (
	"database/sql"
	"testing"

	"github.com/kioku-ai/kioku/internal/sqlitetest"
)

// TestMigrateHistory writes a user's files as the first version of the
// schema stored them, with no history counted, and opens the store: the
// usage's history is then what the store holds besides the files'
// content (the revisions' content and the deleted files').
func TestMigrateHistory(t *testing.T) {
	db := sqlitetest.Open(t)
	if err := db.Migrate("memoryfiles", []string{schema}); err != nil {
		t.Fatal(err)
	}
	err := db.Write(t.Context(), func(tx *sql.Tx) error {
		for _, q := range []string{
			`INSERT INTO memory_file_usages VALUES ('app1', 'ann', 1, 1, 3, 6), ('app1', 'bob', 0, 0, 0, 1)`,
			`INSERT INTO memory_files VALUES ('app1', 'ann', 'f1', '/memories/a', 'abc', 3, 1, 1, 1, 0),
				('app1', 'ann', 'f2', '/memories/b', 'ccccccc', 7, 4, 1, 4, 1)`,
			`INSERT INTO memory_file_revisions VALUES ('app1', 'ann', 'f1', 1, 'CREATED', '/memories/a', 'abc', 3, 1),
				('app1', 'ann', 'f2', 1, 'CREATED', '/memories/b', 'bbbbb', 5, 1),
				('app1', 'ann', 'f2', 2, 'EDITED', '/memories/b', 'ccccccc', 7, 2),
				('app1', 'ann', 'f2', 3, 'RENAMED', '/memories/b', '', 7, 3),
				('app1', 'ann', 'f2', 4, 'DELETED', '/memories/b', '', 7, 4)`,
		} {
			if _, err := tx.Exec(q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]int64{"ann": 3 + 5 + 7 + 7, "bob": 0} {
		u, err := s.Usage(t.Context(), "app1", user)
		if err != nil || u.History != want {
			t.Errorf("%s's usage after the migration = %+v, %v; want a history of %d bytes", user, u, err, want)
		}
	}
}
