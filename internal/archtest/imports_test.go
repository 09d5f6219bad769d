package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pkg is what the rules read of one package in `go list -json`'s output.
type pkg struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	// The package's other Go files: its tests (in the package and in
	// PACKAGE_test) and the files built only elsewhere (other systems,
	// build tags).
	TestGoFiles, XTestGoFiles, IgnoredGoFiles []string
	Imports                                   []string // of its non-test files: tests may import more
	Error                                     *struct{ Err string }
}

// Layers of docs/ARCHITECTURE.md's package map, from the inside out. A
// package may import a package of a lower layer, a service another
// service and a program internal/bench (the other programs are cmd/ and
// examples/, which nothing imports); helpers and test support import
// nothing of the module.
const (
	layerUnknown = iota
	layerBase    // queue (protocol); internal helpers and test support
	layerDomain  // the root package
	layerRecords // batch: the record readers of batch files
	layerStorage // ledger
	layerBackend // ledger/<engine>, ledger/ledgertest
	layerService // replay, report, handler, metrics, queueopen, fsck
	layerProgram // cmd/*, examples/*, internal/bench, internal/kafkafake
)

// layerNames names the layers in messages.
var layerNames = map[int]string{
	layerBase: "protocol and helpers", layerDomain: "domain", layerRecords: "records", layerStorage: "storage",
	layerBackend: "backends", layerService: "services", layerProgram: "programs",
}

// services are the service packages, by path inside the module.
var services = map[string]bool{
	"replay": true, "discard": true, "report": true, "handler": true, "metrics": true, "queueopen": true, "fsck": true, "relay": true,
	"console": true, "task": true, "window": true, "hold": true, "endpoint": true,
}

// helpers are the internal packages that sit beside the layers: for
// cmd/spool, internal/bench and the tests.
var helpers = map[string]bool{
	"internal/sample": true, "internal/spelling": true, "internal/pagecache": true, "internal/clientlog": true, "internal/cmdline": true,
	"internal/testenv": true, "internal/e2e": true, "internal/archtest": true,
}

// anyMayImport are the helpers any package may import: pure functions
// that more than one face of a rule needs (the nearest name of a
// mistyped key, for spool.conf's reader and the CLI's flags).
var anyMayImport = map[string]bool{"internal/spelling": true}

// rootMayImport are the packages outside the standard library the root
// may import: queue, and the golang.org/x packages it needs.
var rootMayImport = map[string]bool{"queue": true, "golang.org/x/time/rate": true}

// batchMayImport says whether batch may import path, outside the
// standard library: the root, and golang.org/x/text for the encodings.
func batchMayImport(mod, path string) bool {
	return path == mod || path == "golang.org/x/text" || strings.HasPrefix(path, "golang.org/x/text/")
}

// layer places rel, a package path inside the module ("" for the root).
func layer(rel string) int {
	switch {
	case rel == "queue" || helpers[rel]:
		return layerBase
	case rel == "":
		return layerDomain
	case rel == "batch":
		return layerRecords
	case rel == "ledger":
		return layerStorage
	case strings.HasPrefix(rel, "ledger/"):
		return layerBackend
	case services[rel]:
		return layerService
	case strings.HasPrefix(rel, "cmd/"), strings.HasPrefix(rel, "examples/"), rel == "internal/bench", rel == "internal/kafkafake":
		return layerProgram
	}
	return layerUnknown
}

// isBackend reports whether rel is a ledger backend.
func isBackend(rel string) bool {
	return strings.HasPrefix(rel, "ledger/") && rel != "ledger/ledgertest"
}

// isStd reports whether an import path is the standard library's: its
// first element has no dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// checkImports returns every break of the import rules among pkgs, the
// packages of module mod, one line each.
func checkImports(mod string, pkgs []pkg) []string {
	inMod := func(path string) (string, bool) {
		if path == mod {
			return "", true
		}
		rel, ok := strings.CutPrefix(path, mod+"/")
		return rel, ok
	}
	name := func(rel string) string {
		if rel == "" {
			return "the root"
		}
		return rel
	}
	var bad []string
	for _, p := range pkgs {
		rel, ok := inMod(p.ImportPath)
		if !ok {
			continue
		}
		from := layer(rel)
		if from == layerUnknown {
			bad = append(bad, fmt.Sprintf("%s is in no layer of the package map: place it in ARCHITECTURE.md and in layer()", name(rel)))
		}
		for _, imp := range p.Imports {
			irel, own := inMod(imp)
			switch {
			case rel == "" && !isStd(imp) && !rootMayImport[imp] && !(own && rootMayImport[irel]):
				bad = append(bad, fmt.Sprintf("the root imports %s: it imports only queue, the standard library and %s", imp, "golang.org/x/time/rate"))
			case rel == "batch" && !isStd(imp) && !batchMayImport(mod, imp):
				bad = append(bad, fmt.Sprintf("batch imports %s: it imports only the root, the standard library and golang.org/x/text", imp))
			case rel != "metrics" && strings.HasPrefix(imp, "github.com/prometheus/"):
				bad = append(bad, fmt.Sprintf("%s imports %s: only metrics imports a monitoring client", name(rel), imp))
			}
			if !own {
				continue
			}
			to := layer(irel)
			switch {
			case rel == "queue":
				bad = append(bad, fmt.Sprintf("queue imports %s: queue imports no package of this module", name(irel)))
			case isBackend(irel) && from != layerProgram:
				bad = append(bad, fmt.Sprintf("%s imports the backend %s: only programs and tests import backends", name(rel), irel))
			case irel == "ledger/ledgertest":
				bad = append(bad, fmt.Sprintf("%s imports ledger/ledgertest: only tests import it", name(rel)))
			case strings.HasPrefix(irel, "cmd/") || strings.HasPrefix(irel, "examples/"):
				bad = append(bad, fmt.Sprintf("%s imports %s: nothing imports cmd/ or examples/", name(rel), irel))
			case strings.HasPrefix(irel, "internal/") && rel != "cmd/spool" && rel != "internal/bench" && !anyMayImport[irel]:
				bad = append(bad, fmt.Sprintf("%s imports %s: internal/ is imported only by cmd/spool, internal/bench and tests", name(rel), irel))
			case from != layerUnknown && to != layerUnknown && !anyMayImport[irel] && !(to < from || to == from && (from == layerService || from == layerProgram)):
				bad = append(bad, fmt.Sprintf("%s (%s) imports %s (%s): a package imports only from the layers below its own", name(rel), layerNames[from], name(irel), layerNames[to]))
			}
		}
	}
	return bad
}

// goList runs `go list -json` over the module from its root and returns
// the module's path and its packages.
func goList(t *testing.T) (string, []pkg) {
	t.Helper()
	root := filepath.Join("..", "..")
	out, err := goCmd(root, "list", "-m")
	if err != nil {
		t.Fatal(err)
	}
	mod := strings.TrimSpace(string(out))
	out, err = goCmd(root, "list", "-e", "-json=ImportPath,Name,Dir,GoFiles,TestGoFiles,XTestGoFiles,IgnoredGoFiles,Imports,Error", "./...")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list %s: %s (its imports are not all known)", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: not run from the module's root?", len(pkgs))
	}
	return mod, pkgs
}

// allGoFiles returns every Go file of p, tests and files built only
// elsewhere included, each as a path.
func (p pkg) allGoFiles() []string {
	var files []string
	for _, list := range [][]string{p.GoFiles, p.TestGoFiles, p.XTestGoFiles, p.IgnoredGoFiles} {
		for _, name := range list {
			if strings.HasSuffix(name, ".go") {
				files = append(files, filepath.Join(p.Dir, name))
			}
		}
	}
	return files
}

// goCmd runs the go tool in dir and returns its standard output.
func goCmd(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// TestImportRules checks docs/ARCHITECTURE.md's import rules on the
// module as it is.
func TestImportRules(t *testing.T) {
	mod, pkgs := goList(t)
	for _, b := range checkImports(mod, pkgs) {
		t.Error(b)
	}
}

// TestImportRulesCatchBreaks gives checkImports one break of each rule
// and checks that it is reported, and that the allowed imports are not.
func TestImportRulesCatchBreaks(t *testing.T) {
	const m = "example.com/spool"
	p := func(rel string, imports ...string) pkg {
		path := m
		if rel != "" {
			path = m + "/" + rel
		}
		for i, imp := range imports {
			if !strings.Contains(imp, ".") {
				imports[i] = strings.TrimSuffix(m+"/"+imp, "/")
			}
		}
		return pkg{ImportPath: path, Imports: imports}
	}
	allowed := []pkg{
		p("queue", "github.com/fsnotify/fsnotify", "golang.org/x/sys/unix"),
		p("", "queue", "golang.org/x/time/rate"),
		p("ledger", "", "queue"),
		p("batch", "", "golang.org/x/text/encoding/htmlindex"),
		p("report", "", "batch", "queue"),
		p("ledger/sqlite", "ledger", "modernc.org/sqlite"),
		p("ledger/ledgertest", "", "ledger", "queue"),
		p("replay", "", "ledger", "queue", "report"),
		p("metrics", "", "queue", "github.com/prometheus/client_golang/prometheus"),
		p("internal/bench", "", "ledger/sqlite", "internal/sample", "handler"),
		p("cmd/spool", "", "ledger/sqlite", "fsck", "internal/bench", "internal/sample"),
		p("examples/orderbalance", "", "queueopen", "ledger/sqlite"),
		p("internal/sample"),
	}
	if bad := checkImports(m, allowed); len(bad) != 0 {
		t.Errorf("allowed imports reported:\n%s", strings.Join(bad, "\n"))
	}
	for _, c := range []struct {
		p    pkg
		want string
	}{
		{p("queue", ""), "queue imports no package of this module"},
		{p("queue", "internal/sample"), "queue imports no package of this module"},
		{p("", "ledger"), "the root imports"},
		{p("", "golang.org/x/sys/unix"), "the root imports golang.org/x/sys/unix"},
		{p("ledger", "ledger/sqlite"), "only programs and tests import backends"},
		{p("fsck", "ledger/postgres"), "only programs and tests import backends"},
		{p("ledger/sqlite", "ledger/postgres"), "only programs and tests import backends"},
		{p("handler", "ledger/ledgertest"), "only tests import it"},
		{p("internal/bench", "cmd/spool"), "nothing imports cmd/ or examples/"},
		{p("cmd/spool", "examples/orderbalance"), "nothing imports cmd/ or examples/"},
		{p("report", "internal/sample"), "internal/ is imported only by"},
		{p("examples/orderbalance", "internal/sample"), "internal/ is imported only by"},
		{p("ledger", "report"), "imports only from the layers below"},
		{p("batch", "queue"), "batch imports example.com/spool/queue: it imports only the root"},
		{p("batch", "github.com/fsnotify/fsnotify"), "batch imports github.com/fsnotify/fsnotify"},
		{p("", "batch"), "the root imports"},
		{p("report", "cmd/spool"), "nothing imports cmd/"},
		{p("internal/pagecache", "queue"), "internal/pagecache (protocol and helpers) imports queue"},
		{p("handler", "github.com/prometheus/client_golang/prometheus"), "only metrics imports a monitoring client"},
		{p("webui", ""), "webui is in no layer"},
	} {
		bad := checkImports(m, append(append([]pkg{}, allowed...), c.p))
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, c.want) }) {
			t.Errorf("%s importing %q: reported %q, want a line with %q", c.p.ImportPath, c.p.Imports, bad, c.want)
		}
	}
}
