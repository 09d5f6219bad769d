package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbidden are the names of the standard library that print or exit, by
// package: library code returns errors, writes to an io.Writer it is
// given, and logs to the *slog.Logger of its configuration.
var forbidden = map[string]func(name string) bool{
	"os":  func(n string) bool { return n == "Exit" || n == "Stdout" || n == "Stderr" },
	"fmt": func(n string) bool { return strings.HasPrefix(n, "Print") },
	"log": func(string) bool { return true }, // every use of the standard logger writes to stderr, Fatal exits
}

// checkOutput returns every use in f of a name that prints or exits, and
// of the builtins print and println, one line each with its position. It
// reads names, not types: a file that imports os and also names a
// variable os is reported, and is clearer renamed.
func checkOutput(fset *token.FileSet, f *ast.File) []string {
	local := map[string]string{} // name in this file -> forbidden package
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if forbidden[path] == nil {
			continue
		}
		name := path
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = path
	}
	var bad []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok {
				if path, ok := local[x.Name]; ok && forbidden[path](n.Sel.Name) {
					bad = append(bad, fmt.Sprintf("%s: %s.%s", fset.Position(n.Pos()), path, n.Sel.Name))
				}
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && (id.Name == "print" || id.Name == "println") {
				bad = append(bad, fmt.Sprintf("%s: the builtin %s", fset.Position(n.Pos()), id.Name))
			}
		}
		return true
	})
	return bad
}

// TestLibraryNeverPrintsOrExits: outside the main packages no file of the
// module prints to the process's stdout or stderr or exits it.
func TestLibraryNeverPrintsOrExits(t *testing.T) {
	_, pkgs := goList(t)
	files := 0
	for _, p := range pkgs {
		if p.Name == "main" {
			continue
		}
		for _, name := range p.GoFiles {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files++
			for _, b := range checkOutput(fset, f) {
				t.Errorf("%s: the library never prints or exits", b)
			}
		}
	}
	if files < 20 {
		t.Fatalf("checked %d files: go list found too few", files)
	}
}

// TestOutputRuleCatchesBreaks gives checkOutput one break of each kind,
// and the look-alikes that are not one.
func TestOutputRuleCatchesBreaks(t *testing.T) {
	for _, c := range []struct {
		src  string
		want int
	}{
		{`import "os"; func f() { os.Exit(1) }`, 1},
		{`import "os"; func f() { _ = os.Stdout; _ = os.Stderr }`, 2},
		{`import xos "os"; func f() { xos.Exit(1) }`, 1},
		{`import "fmt"; func f() { fmt.Println(); fmt.Printf(""); fmt.Print() }`, 3},
		{`import "log"; func f() { log.Printf("x") }`, 1},
		{`func f() { println("x"); print(1) }`, 2},
		{`import ("fmt"; "io"; "log/slog"; "os"); func f(w io.Writer, log *slog.Logger) { fmt.Fprintln(w); _ = fmt.Sprint(); log.Info("x"); _, _ = os.Open("x") }`, 0},
		{`func f() { var os struct{ Exit func() }; os.Exit() }`, 0},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", "package x\n"+c.src, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if bad := checkOutput(fset, f); len(bad) != c.want {
			t.Errorf("%s: reported %q, want %d", c.src, bad, c.want)
		}
	}
}
