package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// engineNames are the names a switch on the ledger's engine would compare
// with: the backends' names and their DSN schemes.
var engineNames = map[string]bool{"sqlite": true, "postgres": true, "postgresql": true, "mysql": true, "mariadb": true}

// literal returns the value of e when it is a string literal, or a sum of
// them ("a" + "b").
func literal(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := literal(e.X)
		y, ok2 := literal(e.Y)
		return x + y, ok && ok2
	case *ast.ParenExpr:
		return literal(e.X)
	}
	return "", false
}

// checkStyle returns, one line each with its position, every comparison
// of a value with an engine's name (x == "postgres", a case "mysql":)
// when engines is set, and, when hints is, every message whose hint
// follows a semicolon ("...; Try: ...") instead of a full stop, the one
// form of every message (tests hold such strings as what they look for).
func checkStyle(fset *token.FileSet, f *ast.File, engines, hints bool) []string {
	var bad []string
	engine := func(e ast.Expr) {
		if s, ok := literal(e); ok && engineNames[strings.ToLower(s)] {
			bad = append(bad, fmt.Sprintf("%s: compares with the engine name %q: ask the dialect or the backend's registration instead", fset.Position(e.Pos()), s))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if engines && (n.Op == token.EQL || n.Op == token.NEQ) {
				engine(n.X)
				engine(n.Y)
			}
			if s, ok := literal(n); ok && hints && strings.Contains(s, "; Try") {
				bad = append(bad, fmt.Sprintf("%s: a hint after a semicolon: write \". Try:\"", fset.Position(n.Pos())))
				return false
			}
		case *ast.CaseClause:
			if engines {
				for _, e := range n.List {
					engine(e)
				}
			}
		case *ast.BasicLit:
			if s, ok := literal(n); ok && hints && strings.Contains(s, "; Try") {
				bad = append(bad, fmt.Sprintf("%s: a hint after a semicolon: write \". Try:\"", fset.Position(n.Pos())))
			}
		}
		return true
	})
	return bad
}

// TestNoEngineSwitchOutsideBackends: outside the backend packages nothing
// compares a value with an engine's name (what differs between engines is
// a method of the dialect, or of the backend's registration), in the code
// and in its tests alike (a test that runs on several engines takes what
// differs from a table of them, not from a comparison of names), and no
// message of the code puts its hint after a semicolon.
func TestNoEngineSwitchOutsideBackends(t *testing.T) {
	mod, pkgs := goList(t)
	files, tests := 0, 0
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		for _, path := range p.allGoFiles() {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files++
			test := strings.HasSuffix(path, "_test.go")
			if test {
				tests++
			}
			for _, b := range checkStyle(fset, f, !isBackend(rel), !test) {
				t.Error(b)
			}
		}
	}
	if files < 20 || tests < 20 {
		t.Fatalf("checked %d files, %d of them tests: go list found too few", files, tests)
	}
}

// TestStyleRuleCatchesBreaks gives checkStyle one break of each kind, and
// the look-alikes that are not one.
func TestStyleRuleCatchesBreaks(t *testing.T) {
	for _, c := range []struct {
		src     string
		engines bool
		want    int
	}{
		{`func f(s string) bool { return s == "postgres" }`, true, 1},
		{`func f(s string) bool { return "mysql" != s || s == "sqlite" }`, true, 2},
		{`func f(s string) { switch s { case "postgresql", "x": } }`, true, 1},
		{`func f(s string) bool { return s == "postgres" }`, false, 0},
		{`func f(s string) bool { return s == "post" }`, true, 0},
		{`const scheme = "sqlite"; var _ = map[string]int{"mysql": 1}`, true, 0},
		{`import "errors"; var _ = errors.New("x is wrong; Try: y")`, false, 1},
		{`import "errors"; var _ = errors.New("x is wrong; " + "Try: y")`, false, 1},
		{`import "errors"; var _ = errors.New("x is wrong. Try: y")`, false, 0},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", "package x\n"+c.src, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if bad := checkStyle(fset, f, c.engines, true); len(bad) != c.want {
			t.Errorf("%s: reported %q, want %d", c.src, bad, c.want)
		}
	}
}
