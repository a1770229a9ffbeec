package main

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// upstreamTestImporters are the packages of other modules that import the
// testing packages in their non-test files, so that every binary linking
// them lists testing and net/http/httptest in go list -deps: only genai,
// for its replay client (replay_api_client.go, in every release up to
// v1.77.0). Its code is not reachable from kioku, so the linker leaves it
// out; what remains of the two packages in the binary is their init
// (httptest registers its -httptest.serve flag on flag.CommandLine, which
// kioku does not parse).
var upstreamTestImporters = []string{
	"google.golang.org/genai",
}

// benchHarness are packages the production binary must not link: the
// benchmarks (cmd/kioku-bench) and the scripted model they serve to a node
// (the companion demo links it too, for its offline mode).
var benchHarness = []string{
	"github.com/kioku-ai/kioku/cmd/kioku-bench",
	"github.com/kioku-ai/kioku/model/scripted",
}

// TestBinariesLinkNoTestCode checks the shipped commands, kioku and the
// companion: no package of this module that they link imports testing or
// net/http/httptest (the benchmarks' fake model is a scripted.Gemini on a
// real listener, not modeltest's httptest server), and no package of
// another module does besides upstreamTestImporters. kioku links none of
// the benchmark harness (benchHarness).
func TestBinariesLinkNoTestCode(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"github.com/kioku-ai/kioku/cmd/kioku", "github.com/kioku-ai/kioku/cmd/companion"} {
		out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Module", cmd).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", cmd, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		linked := 0
		for {
			var p struct {
				ImportPath string
				Imports    []string
				Module     *struct{ Path string }
			}
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			linked++
			if strings.HasSuffix(cmd, "/cmd/kioku") && slices.Contains(benchHarness, p.ImportPath) {
				t.Errorf("%s links %s, part of the benchmark harness", cmd, p.ImportPath)
			}
			for _, testPkg := range []string{"testing", "net/http/httptest"} {
				if !slices.Contains(p.Imports, testPkg) {
					continue
				}
				switch {
				case p.Module != nil && p.Module.Path == "github.com/kioku-ai/kioku":
					t.Errorf("%s links %s, which imports %s: test code in the shipped binary", cmd, p.ImportPath, testPkg)
				case !slices.Contains(upstreamTestImporters, p.ImportPath):
					t.Errorf("%s links %s, which imports %s (not one of the known upstream importers %v)", cmd, p.ImportPath, testPkg, upstreamTestImporters)
				}
			}
		}
		if linked < 100 {
			t.Fatalf("go list -deps %s listed %d packages; is the command's path right?", cmd, linked)
		}
	}
}
