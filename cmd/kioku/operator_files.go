package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/resource"
)

// toolPath splits apps/APP/users/USER/memories/PATH into the user's name
// and the tool's path (/memories/PATH); path is "" when arg names only
// the user.
func toolPath(arg string) (user, path string, err error) {
	parts := strings.SplitN(arg, "/", 5)
	if len(parts) < 4 {
		return "", "", fmt.Errorf("%q is not of the form apps/APP/users/USER[/memories/PATH]", arg)
	}
	user = strings.Join(parts[:4], "/")
	if _, _, err := resource.ParseUser("argument", user); err != nil {
		return "", "", err
	}
	if len(parts) == 5 {
		path = "/" + parts[4]
	}
	return user, path, nil
}

// fileName finds the resource name of the file an argument names: its
// name, or its user and path (the file there now).
func fileName(ctx context.Context, e *opEnv, arg string) (string, error) {
	if _, ok := resource.MemoryFile.Match(arg); ok {
		return arg, nil
	}
	user, path, err := toolPath(arg)
	if err != nil {
		return "", err
	}
	if path == "" {
		return "", fmt.Errorf("%q names a user, not a file: add the file's path (apps/APP/users/USER/memories/notes.md)", arg)
	}
	res, err := e.c.ListMemoryFiles(ctx, &kiokuv1.ListMemoryFilesRequest{Parent: user, Path: path, PageSize: 2})
	if err != nil {
		return "", err
	}
	for _, f := range res.GetMemoryFiles() {
		if f.GetPath() == strings.TrimSuffix(path, "/") {
			return f.GetName(), nil
		}
	}
	if len(res.GetMemoryFiles()) > 0 {
		return "", fmt.Errorf("%s is a directory: kioku files list %s shows what it holds", path, arg)
	}
	return "", fmt.Errorf("%s has no memory file at %s", user, path)
}

// execute runs one command of the memory tool and returns its answer; an
// answer that reports an error is returned as the error.
func execute(ctx context.Context, e *opEnv, user string, input map[string]any) (*kiokuv1.ExecuteResponse, error) {
	in, err := structpb.NewStruct(input)
	if err != nil {
		return nil, err
	}
	res, err := e.c.Execute(ctx, &kiokuv1.ExecuteRequest{Parent: user, Input: in})
	if err != nil {
		return nil, err
	}
	if res.GetIsError() {
		return res, errors.New(res.GetOutput())
	}
	return res, nil
}

func filesList(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	deleted := fs.Bool("deleted", false, "list the deleted files too (kept with their revisions)")
	limit := limitFlag(fs, 100)
	return func(ctx context.Context, e *opEnv) error {
		user, path, err := toolPath(e.arg)
		if err != nil {
			return err
		}
		all := e.c.AllMemoryFiles(ctx, &kiokuv1.ListMemoryFilesRequest{Parent: user, Path: path, ShowDeleted: *deleted, PageSize: 100})
		return printListing(e, *limit, all, []string{"PATH", "BYTES", "REV", "UPDATED", "FILE"}, func(f *kiokuv1.MemoryFile) []string {
			p := f.GetPath()
			if f.GetDeleted() {
				p += " (deleted)"
			}
			return []string{p, strconv.FormatInt(f.GetSizeBytes(), 10), strconv.FormatInt(f.GetRevision(), 10), ts(f.GetUpdateTime()), f.GetName()}
		})
	}
}

func filesCat(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		name, err := fileName(ctx, e, e.arg)
		if err != nil {
			return err
		}
		f, err := e.c.GetMemoryFile(ctx, &kiokuv1.GetMemoryFileRequest{Name: name})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(f)
		}
		_, err = fmt.Fprint(e.out, f.GetContent())
		return err
	}
}

func filesView(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		user, path, err := toolPath(e.arg)
		if err != nil {
			return err
		}
		if path == "" {
			path = "/memories"
		}
		res, err := execute(ctx, e, user, map[string]any{"command": "view", "path": path})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(res)
		}
		return e.done("%s", res.GetOutput())
	}
}

func filesRevisions(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	limit := limitFlag(fs, 50)
	return func(ctx context.Context, e *opEnv) error {
		name, err := fileName(ctx, e, e.arg)
		if err != nil {
			return err
		}
		all := e.c.AllMemoryFileRevisions(ctx, &kiokuv1.ListMemoryFileRevisionsRequest{Parent: name, PageSize: 100})
		return printListing(e, *limit, all, []string{"REV", "ACTION", "TIME", "PATH", "BYTES", "CONTENT"}, func(r *kiokuv1.MemoryFileRevision) []string {
			action := strings.TrimPrefix(r.GetAction().String(), "MEMORY_FILE_ACTION_")
			return []string{lastSegment(r.GetName()), action, ts(r.GetCreateTime()), r.GetPath(), strconv.FormatInt(r.GetSizeBytes(), 10), shorten(r.GetContent(), 50)}
		})
	}
}

func filesRm(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		user, path, err := toolPath(e.arg)
		if err != nil {
			return err
		}
		if path == "" {
			return fmt.Errorf("%q names a user: add the path to delete (apps/APP/users/USER/memories/notes.md); kioku users delete erases a user", e.arg)
		}
		res, err := execute(ctx, e, user, map[string]any{"command": "delete", "path": path})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(res)
		}
		return e.done("%s", res.GetOutput())
	}
}
