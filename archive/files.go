package archive

import (
	"fmt"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/resource"
)

// The records of the memory files (format version 2), as they are
// encoded. They are the format: a field changes only with a new Version.
type (
	memoryFileRecord struct {
		Kind       Kind      `json:"kind"`
		Name       string    `json:"name"`
		Path       string    `json:"path"`
		Content    string    `json:"content"`
		Revision   int64     `json:"revision"`
		CreateTime time.Time `json:"create_time,omitzero"`
		UpdateTime time.Time `json:"update_time,omitzero"`
		Deleted    bool      `json:"deleted,omitempty"`
	}
	fileRevisionRecord struct {
		Kind       Kind      `json:"kind"`
		Name       string    `json:"name"`
		Action     string    `json:"action"`
		Path       string    `json:"path"`
		Content    string    `json:"content,omitempty"`
		Size       int64     `json:"size"`
		CreateTime time.Time `json:"create_time,omitzero"`
	}
)

// MemoryFile writes a memory_file record, with the file's content.
func (w *Writer) MemoryFile(f *memoryfiles.File) error {
	return w.write(KindMemoryFile, memoryFileRecord{
		Kind: KindMemoryFile, Name: f.Name(), Path: f.Path, Content: f.Content, Revision: f.Revision,
		CreateTime: f.CreateTime.UTC(), UpdateTime: f.UpdateTime.UTC(), Deleted: f.Deleted,
	})
}

// MemoryFileRevision writes a memory_file_revision record.
func (w *Writer) MemoryFileRevision(r *memoryfiles.Revision) error {
	return w.write(KindFileRevision, fileRevisionRecord{
		Kind: KindFileRevision, Name: r.Name(), Action: r.Action.String(), Path: r.Path, Content: r.Content, Size: r.Size,
		CreateTime: r.CreateTime.UTC(),
	})
}

// decodeFileRecord decodes a memory_file or memory_file_revision record
// into rec.
func decodeFileRecord(rec *Record, line []byte) (err error) {
	if rec.Kind == KindMemoryFile {
		rec.File, err = decodeMemoryFile(line)
	} else {
		rec.FileRevision, err = decodeFileRevision(line)
	}
	return err
}

// decodeMemoryFile decodes a memory_file record, refusing a path the
// memory tool would not have written and content over its limit.
func decodeMemoryFile(line []byte) (*memoryfiles.File, error) {
	var m memoryFileRecord
	if err := strict(line, &m); err != nil {
		return nil, err
	}
	app, user, id, err := resource.ParseMemoryFile("name", m.Name)
	if err != nil {
		return nil, err
	}
	if err := checkFilePath(m.Path); err != nil {
		return nil, err
	}
	if len(m.Content) > memoryfiles.MaxFileBytes {
		return nil, fmt.Errorf("the content is %d bytes, over the limit of %d", len(m.Content), memoryfiles.MaxFileBytes)
	}
	return &memoryfiles.File{App: app, User: user, ID: id, Path: m.Path, Content: m.Content, Size: int64(len(m.Content)),
		Revision: m.Revision, CreateTime: m.CreateTime, UpdateTime: m.UpdateTime, Deleted: m.Deleted}, nil
}

// decodeFileRevision decodes a memory_file_revision record.
func decodeFileRevision(line []byte) (*memoryfiles.Revision, error) {
	var m fileRevisionRecord
	if err := strict(line, &m); err != nil {
		return nil, err
	}
	app, user, id, n, err := resource.ParseMemoryFileRevision("name", m.Name)
	if err != nil {
		return nil, err
	}
	action, err := memoryfiles.ParseAction(m.Action)
	if err != nil {
		return nil, err
	}
	if err := checkFilePath(m.Path); err != nil {
		return nil, err
	}
	return &memoryfiles.Revision{App: app, User: user, FileID: id, Number: n, Action: action, Path: m.Path,
		Content: m.Content, Size: m.Size, CreateTime: m.CreateTime}, nil
}

// checkFilePath refuses a memory file's path that the memory tool would
// not have written: one CleanPath refuses or changes, or Root itself.
func checkFilePath(p string) error {
	clean, err := memoryfiles.CleanPath(p)
	if err != nil {
		return fmt.Errorf("path: %s", strings.TrimPrefix(err.Error(), "Error: "))
	}
	if clean != p || p == memoryfiles.Root {
		return fmt.Errorf("path %q is not the path of a memory file", p)
	}
	return nil
}
