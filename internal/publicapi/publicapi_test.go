// Package publicapi holds the checks on kioku's public Go API as a whole:
// no exported identifier of a public package (one outside internal/ and
// not a command) names a type of an internal package, which a caller
// outside the module could not name; and the domain packages link no
// transport.
package publicapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/kioku-ai/kioku"

// listed is a package as go list -export describes it.
type listed struct {
	ImportPath, Name, Export, Dir string
	GoFiles                       []string
}

// goList runs go list -export -deps -json on patterns, in the module's
// root, and returns the packages by import path.
func goList(t *testing.T, patterns ...string) map[string]listed {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Name,Export,Dir,GoFiles"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	pkgs := map[string]listed{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// importerOf returns an importer reading the export data go list found.
func importerOf(fset *token.FileSet, pkgs map[string]listed) types.Importer {
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		p, ok := pkgs[path]
		if !ok || p.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p.Export)
	})
}

// internalPath reports whether a package path has an internal element, so
// that only its own tree may import it.
func internalPath(path string) bool {
	return slices.Contains(strings.Split(path, "/"), "internal")
}

// public reports whether a package of the module is public API: importable
// (not a command, not tests alone) and outside every internal tree.
func public(p listed) bool {
	return (p.ImportPath == module || strings.HasPrefix(p.ImportPath, module+"/")) && p.Name != "main" && len(p.GoFiles) > 0 && !internalPath(p.ImportPath)
}

// TestNoInternalTypeInPublicAPI walks every exported function, method,
// variable, constant, type, field and interface method of every public
// package, and the unexported types they reach (whose exported fields
// and methods a caller can use), and fails on each whose type mentions a
// package under an internal/ directory, and on each exported constant or
// variable whose value is written in terms of one (which go doc shows).
func TestNoInternalTypeInPublicAPI(t *testing.T) {
	pkgs := goList(t, "./...")
	fset := token.NewFileSet()
	imp := importerOf(fset, pkgs)
	var paths []string
	for path, p := range pkgs {
		if public(p) {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	if len(paths) < 20 || !slices.Contains(paths, module+"/sessions") || !slices.Contains(paths, module+"/resource") {
		t.Fatalf("found %d public packages (%v); is the module's root right?", len(paths), paths)
	}
	for _, path := range paths {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, leak := range leaks(pkg) {
			t.Error(leak)
		}
		var files []*ast.File
		for _, name := range pkgs[path].GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(pkgs[path].Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		for _, leak := range valueLeaks(pkg.Name(), files) {
			t.Error(leak)
		}
	}
	t.Logf("%d public packages checked", len(paths))
}

// TestLeaksAreFound is the check of the check: a package whose exported
// API names an internal type, directly, through an unexported type and
// through an interface, is reported at each place, and its unexported
// API is not.
func TestLeaksAreFound(t *testing.T) {
	const src = `package leaky

import "github.com/kioku-ai/kioku/internal/aip"

type Exported struct {
	Token aip.PageToken
	quiet aip.PageToken
}

type hidden struct{ Token *aip.PageToken }

func Reach() hidden { return hidden{} }

type Lister interface{ List() []aip.PageToken }

type Alias = aip.PageToken

func (Exported) Next(map[string]aip.PageToken) {}

func unexported() aip.PageToken { return aip.PageToken{} }

const Fine = 1

const (
	Limit = aip.MaxPageSize
	limit = aip.MaxPageSize
)
`
	pkgs := goList(t, module+"/internal/aip")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "leaky.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importerOf(fset, pkgs)}
	pkg, err := conf.Check(module+"/leaky", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := append(leaks(pkg), valueLeaks(pkg.Name(), []*ast.File{f})...)
	want := []string{
		"leaky.Alias: names github.com/kioku-ai/kioku/internal/aip.PageToken",
		"leaky.Exported.Next: names github.com/kioku-ai/kioku/internal/aip.PageToken",
		"leaky.Exported.Token: names github.com/kioku-ai/kioku/internal/aip.PageToken",
		"leaky.Lister.List: names github.com/kioku-ai/kioku/internal/aip.PageToken",
		"leaky.Reach (through leaky.hidden).Token: names github.com/kioku-ai/kioku/internal/aip.PageToken",
		"leaky.Limit: its value names github.com/kioku-ai/kioku/internal/aip.MaxPageSize",
	}
	if !slices.Equal(got, want) {
		t.Errorf("leaks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// valueLeaks returns one line per exported constant or variable of a
// package's files whose value names an identifier of an internal package.
func valueLeaks(pkgName string, files []*ast.File) []string {
	var out []string
	for _, f := range files {
		imports := map[string]string{} // name in the file -> path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST && g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !name.IsExported() || len(vs.Values) == 0 {
						continue
					}
					v := vs.Values[min(i, len(vs.Values)-1)]
					ast.Inspect(v, func(n ast.Node) bool {
						sel, ok := n.(*ast.SelectorExpr)
						if !ok {
							return true
						}
						if x, ok := sel.X.(*ast.Ident); ok && internalPath(imports[x.Name]) {
							out = append(out, fmt.Sprintf("%s.%s: its value names %s.%s", pkgName, name.Name, imports[x.Name], sel.Sel.Name))
						}
						return true
					})
				}
			}
		}
	}
	return out
}

// walker finds the internal types a package's exported API names.
type walker struct {
	pkg   *types.Package
	seen  map[*types.TypeName]bool
	found map[string]bool
}

// leaks returns, sorted, one line per exported identifier of pkg whose
// type names an internal package's type.
func leaks(pkg *types.Package) []string {
	w := &walker{pkg: pkg, seen: map[*types.TypeName]bool{}, found: map[string]bool{}}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		where := pkg.Name() + "." + name
		if tn, ok := obj.(*types.TypeName); ok && !tn.IsAlias() {
			w.seen[tn] = true
			w.named(where, tn.Type().(*types.Named))
			continue
		}
		w.typ(where, obj.Type())
	}
	out := make([]string, 0, len(w.found))
	for l := range w.found {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// named walks a named type of the module: its type parameters, its
// underlying type and its exported methods.
func (w *walker) named(where string, n *types.Named) {
	w.params(where, n.TypeParams())
	w.typ(where, n.Underlying())
	for m := range n.Methods() {
		if m.Exported() {
			w.typ(where+"."+m.Name(), m.Type())
		}
	}
}

func (w *walker) params(where string, tps *types.TypeParamList) {
	for tp := range tps.TypeParams() {
		w.typ(where, tp.Constraint())
	}
}

// typ walks t, reporting each internal type it names.
func (w *walker) typ(where string, t types.Type) {
	switch t := t.(type) {
	case *types.Alias:
		if w.report(where, t.Obj()) {
			return
		}
		w.typ(where, types.Unalias(t))
	case *types.Named:
		if w.report(where, t.Obj()) {
			return
		}
		for a := range t.TypeArgs().Types() {
			w.typ(where, a)
		}
		// An unexported type of the module that the API reaches: its
		// exported fields and methods are the caller's too.
		obj := t.Obj()
		if obj.Pkg() != nil && !obj.Exported() && strings.HasPrefix(obj.Pkg().Path(), module) && !w.seen[obj] {
			w.seen[obj] = true
			w.named(fmt.Sprintf("%s (through %s.%s)", where, obj.Pkg().Name(), obj.Name()), t.Origin())
		}
	case *types.Pointer:
		w.typ(where, t.Elem())
	case *types.Slice:
		w.typ(where, t.Elem())
	case *types.Array:
		w.typ(where, t.Elem())
	case *types.Chan:
		w.typ(where, t.Elem())
	case *types.Map:
		w.typ(where, t.Key())
		w.typ(where, t.Elem())
	case *types.Signature:
		w.params(where, t.TypeParams())
		for _, tuple := range []*types.Tuple{t.Params(), t.Results()} {
			for v := range tuple.Variables() {
				w.typ(where, v.Type())
			}
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() || f.Embedded() {
				w.typ(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for m := range t.ExplicitMethods() {
			if m.Exported() {
				w.typ(where+"."+m.Name(), m.Type())
			}
		}
		for e := range t.EmbeddedTypes() {
			w.typ(where, e)
		}
	case *types.Union:
		for i := range t.Len() {
			w.typ(where, t.Term(i).Type())
		}
	case *types.TypeParam:
		// Its constraint is walked with the type parameters.
	}
}

// report records where when obj is a type of an internal package, and
// says whether it did.
func (w *walker) report(where string, obj *types.TypeName) bool {
	if obj.Pkg() == nil || !internalPath(obj.Pkg().Path()) {
		return false
	}
	w.found[fmt.Sprintf("%s: names %s.%s", where, obj.Pkg().Path(), obj.Name())] = true
	return true
}

// TestDomainsLinkNoTransport: the domain packages and the engine link no
// RPC library, no generated code and none of kioku's transport edge or
// assembly, so that a backend or a program using them does not either.
func TestDomainsLinkNoTransport(t *testing.T) {
	pkgs := goList(t, "./sessions", "./memorybank", "./jobs")
	if len(pkgs) < 20 {
		t.Fatalf("go list listed %d packages; is the module's root right?", len(pkgs))
	}
	for path := range pkgs {
		for _, banned := range []string{"connectrpc.com/", module + "/gen/", module + "/internal/transport", module + "/internal/node", module + "/internal/workflow", module + "/client"} {
			if strings.HasPrefix(path, banned) {
				t.Errorf("sessions, memorybank or jobs links %s", path)
			}
		}
	}
}
