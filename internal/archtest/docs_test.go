package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The claims of docs/ARCHITECTURE.md that the code can contradict are
// checked here against the code, so that the document says what is, not
// what was: who imports each module from outside the standard library,
// where the library panics, and that the functions named in "Where each
// invariant is kept" exist. The tables these tests read are marked in the
// document by an HTML comment, <!-- archtest:NAME -->, just above them.

// architecture reads docs/ARCHITECTURE.md.
func architecture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tableRows returns the cells of the Markdown table that begins at the
// first line of text starting with "|", without its header and separator
// rows, up to the first line that is not a row.
func tableRows(text string) [][]string {
	var rows [][]string
	started := false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		return nil
	}
	return rows[2:] // the header and the |---| separator
}

// markedTable returns the rows of the table under the marker
// <!-- archtest:NAME --> in doc.
func markedTable(doc, name string) ([][]string, error) {
	marker := "<!-- archtest:" + name + " -->"
	_, after, ok := strings.Cut(doc, marker)
	if !ok {
		return nil, fmt.Errorf("no %s in ARCHITECTURE.md: the table it marks is what this test checks", marker)
	}
	rows := tableRows(after)
	if len(rows) == 0 {
		return nil, fmt.Errorf("no table under %s in ARCHITECTURE.md", marker)
	}
	return rows, nil
}

// section returns the text under the heading "## TITLE" (any level) of
// doc, up to the next heading.
func section(doc, title string) (string, error) {
	re := regexp.MustCompile(`(?m)^#+ ` + regexp.QuoteMeta(title) + `\s*$`)
	loc := re.FindStringIndex(doc)
	if loc == nil {
		return "", fmt.Errorf("no section %q in ARCHITECTURE.md", title)
	}
	rest := doc[loc[1]:]
	if next := regexp.MustCompile(`(?m)^#+ `).FindStringIndex(rest); next != nil {
		rest = rest[:next[0]]
	}
	return rest, nil
}

// backticked returns the `code` spans of s.
func backticked(s string) []string {
	var spans []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(s, -1) {
		spans = append(spans, m[1])
	}
	return spans
}

// rootName is how the tables name the root package.
const rootName = "the root"

// outsideParens returns s without its parenthesized remarks.
func outsideParens(s string) string {
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// importers returns the packages a cell of the imports table names: its
// backticked paths inside the module, and "" for "the root", each with
// a remark in parentheses or not.
func importers(cell string) []string {
	cell = outsideParens(cell)
	pkgs := backticked(cell)
	if strings.Contains(cell, rootName) {
		pkgs = append(pkgs, "")
	}
	return pkgs
}

// sortedKeys returns the keys of set in order, "" shown as "the root".
func sortedKeys(set map[string]bool) []string {
	var keys []string
	for k := range set {
		if k == "" {
			k = rootName
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkDocImports compares the table of outside imports (a row: a module
// path, then the packages whose non-test files import it) with pkgs, the
// packages of module mod as go list sees them, and returns each drift,
// one line each: an importer the table lacks, one it names that imports
// nothing of the module, and an outside import no row covers.
func checkDocImports(mod string, pkgs []pkg, rows [][]string) []string {
	var bad []string
	want := map[string]map[string]bool{} // module -> importers
	var modules []string
	for _, r := range rows {
		if len(r) < 2 || len(backticked(r[0])) != 1 {
			bad = append(bad, fmt.Sprintf("imports table: row %q: want `module` | its importers", r))
			continue
		}
		m := backticked(r[0])[0]
		modules = append(modules, m)
		want[m] = map[string]bool{}
		for _, p := range importers(r[1]) {
			want[m][p] = true
		}
	}
	got := map[string]map[string]bool{}
	for m := range want {
		got[m] = map[string]bool{}
	}
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, mod+"/")
		if p.ImportPath == mod {
			rel, ok = "", true
		}
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			if isStd(imp) || imp == mod || strings.HasPrefix(imp, mod+"/") {
				continue
			}
			i := slices.IndexFunc(modules, func(m string) bool { return imp == m || strings.HasPrefix(imp, m+"/") })
			if i < 0 {
				bad = append(bad, fmt.Sprintf("%s imports %s, which no row of ARCHITECTURE.md's table of outside imports names", name(rel), imp))
				continue
			}
			got[modules[i]][rel] = true
		}
	}
	for _, m := range modules {
		for _, p := range sortedKeys(got[m]) {
			if p == rootName {
				p = ""
			}
			if !want[m][p] {
				bad = append(bad, fmt.Sprintf("%s imports %s (go list), but ARCHITECTURE.md's table does not say so", name(p), m))
			}
		}
		for _, p := range sortedKeys(want[m]) {
			if p == rootName {
				p = ""
			}
			if !got[m][p] {
				bad = append(bad, fmt.Sprintf("ARCHITECTURE.md says %s imports %s, but go list says it does not", name(p), m))
			}
		}
	}
	return bad
}

// name is rel as a message names it.
func name(rel string) string {
	if rel == "" {
		return rootName
	}
	return rel
}

// goFile is a parsed non-test file of the module, by its path from the
// module's root.
type goFile struct {
	path string
	fset *token.FileSet
	f    *ast.File
}

// moduleFiles parses every non-test Go file of pkgs.
func moduleFiles(t *testing.T, pkgs []pkg) []goFile {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var files []goFile
	for _, p := range pkgs {
		for _, n := range p.GoFiles {
			path := filepath.Join(p.Dir, n)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, goFile{filepath.ToSlash(rel), fset, f})
		}
	}
	if len(files) < 20 {
		t.Fatalf("parsed %d files: go list found too few", len(files))
	}
	return files
}

// panics returns "FILE FUNC" for each function of files that calls the
// builtin panic ("FILE (package level)" outside any function).
func panics(files []goFile) map[string]bool {
	found := map[string]bool{}
	for _, gf := range files {
		where := func(fn string) func(ast.Node) bool {
			return func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "panic" {
						found[gf.path+" "+fn] = true
					}
				}
				return true
			}
		}
		for _, d := range gf.f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if fd.Body != nil {
					ast.Inspect(fd.Body, where(fd.Name.Name))
				}
				continue
			}
			ast.Inspect(d, where("(package level)"))
		}
	}
	return found
}

// checkDocPanics compares the table of the places that panic (a row: the
// files, then the function, then why) with found, from panics, and
// returns each drift, one line each.
func checkDocPanics(rows [][]string, found map[string]bool) []string {
	var bad []string
	want := map[string]bool{}
	for _, r := range rows {
		fns := backticked(r[min(1, len(r)-1)])
		if len(r) < 2 || len(fns) != 1 || len(backticked(r[0])) == 0 {
			bad = append(bad, fmt.Sprintf("panics table: row %q: want `file`... | `function` | why", r))
			continue
		}
		for _, f := range backticked(r[0]) {
			want[f+" "+fns[0]] = true
		}
	}
	for _, k := range sortedKeys(found) {
		if !want[k] {
			bad = append(bad, fmt.Sprintf("%s panics, but ARCHITECTURE.md's list of the places that panic does not name it", strings.Replace(k, " ", ": ", 1)))
		}
	}
	for _, k := range sortedKeys(want) {
		if !found[k] {
			bad = append(bad, fmt.Sprintf("ARCHITECTURE.md says %s panics, but it does not (or no longer exists)", strings.Replace(k, " ", ": ", 1)))
		}
	}
	return bad
}

// declared returns the names files declare: each function, type, variable
// and constant by its name and by PACKAGE.NAME, each method and each
// interface method by its name and by TYPE.NAME.
func declared(files []goFile) map[string]bool {
	names := map[string]bool{}
	for _, gf := range files {
		pkgName := gf.f.Name.Name
		add := func(n string) { names[n], names[pkgName+"."+n] = true, true }
		for _, d := range gf.f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				names[d.Name.Name] = true
				if d.Recv == nil {
					add(d.Name.Name)
					continue
				}
				t := d.Recv.List[0].Type
				for {
					switch x := t.(type) {
					case *ast.StarExpr:
						t = x.X
						continue
					case *ast.IndexExpr:
						t = x.X
						continue
					case *ast.IndexListExpr:
						t = x.X
						continue
					}
					break
				}
				if id, ok := t.(*ast.Ident); ok {
					names[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						add(s.Name.Name)
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									names[n.Name], names[s.Name.Name+"."+n.Name] = true, true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

// goName matches a backticked span that names Go code: NAME or X.NAME,
// with an argument list or not (`requeueDue(s, true)`). A span with an
// underscore is a column or a setting (`msg_id`, `_txlock=immediate`):
// Go names in this module are mixedCaps.
var goName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)(?:\(.*\))?$`)

// checkDocNames returns, one line each, every backticked Go name in
// cells that names stays undeclared in the module.
func checkDocNames(cells []string, names map[string]bool) []string {
	var bad []string
	for _, c := range cells {
		for _, span := range backticked(c) {
			m := goName.FindStringSubmatch(span)
			if m == nil || strings.Contains(span, "_") || names[m[1]] {
				continue
			}
			bad = append(bad, fmt.Sprintf("ARCHITECTURE.md, \"Where each invariant is kept\", names `%s`, which no non-test file of the module declares", span))
		}
	}
	return bad
}

// TestDocImports: ARCHITECTURE.md's table of who imports each module from
// outside the standard library is what go list says.
func TestDocImports(t *testing.T) {
	rows, err := markedTable(architecture(t), "imports")
	if err != nil {
		t.Fatal(err)
	}
	mod, pkgs := goList(t)
	for _, b := range checkDocImports(mod, pkgs, rows) {
		t.Error(b)
	}
}

// TestDocPanics: ARCHITECTURE.md's list of the places that panic is every
// call of panic in the module's non-test files.
func TestDocPanics(t *testing.T) {
	rows, err := markedTable(architecture(t), "panics")
	if err != nil {
		t.Fatal(err)
	}
	_, pkgs := goList(t)
	for _, b := range checkDocPanics(rows, panics(moduleFiles(t, pkgs))) {
		t.Error(b)
	}
}

// TestDocInvariantNames: every Go name in the "kept in" column of
// ARCHITECTURE.md's "Where each invariant is kept" is declared in the
// module's non-test files.
func TestDocInvariantNames(t *testing.T) {
	s, err := section(architecture(t), "Where each invariant is kept")
	if err != nil {
		t.Fatal(err)
	}
	rows := tableRows(s)
	if len(rows) != 7 {
		t.Fatalf("the table has %d rows, want one per invariant, I1 to I7", len(rows))
	}
	var cells []string
	for _, r := range rows {
		cells = append(cells, r[len(r)-1])
	}
	_, pkgs := goList(t)
	for _, b := range checkDocNames(cells, declared(moduleFiles(t, pkgs))) {
		t.Error(b)
	}
}

// TestDocChecksCatchDrift feeds each check a document and a module that
// disagree, one way and the other, and one that agrees.
func TestDocChecksCatchDrift(t *testing.T) {
	const m = "example.com/spool"
	p := func(rel string, imports ...string) pkg {
		path := m
		if rel != "" {
			path += "/" + rel
		}
		return pkg{ImportPath: path, Imports: imports}
	}
	doc := "# x\n\n<!-- archtest:imports -->\n\n" +
		"| module | imported by |\n|---|---|\n" +
		"| `golang.org/x/sys` | `queue`, `ledger/sqlite` (its `file.go`) |\n" +
		"| `golang.org/x/time` | the root (`Config.Rate`) |\n" +
		"\nprose after the table\n"
	rows, err := markedTable(doc, "imports")
	if err != nil {
		t.Fatal(err)
	}
	agree := []pkg{
		p("queue", "os", "golang.org/x/sys/unix", m),
		p("ledger/sqlite", "golang.org/x/sys/unix"),
		p("", "golang.org/x/time/rate", m+"/queue"),
	}
	if bad := checkDocImports(m, agree, rows); len(bad) != 0 {
		t.Errorf("a module that agrees: reported %q", bad)
	}
	for _, c := range []struct {
		pkgs []pkg
		want string
	}{
		{append(slices.Clone(agree), p("metrics", "golang.org/x/sys/unix")), "metrics imports golang.org/x/sys (go list), but ARCHITECTURE.md's table does not say so"},
		{agree[1:], "ARCHITECTURE.md says queue imports golang.org/x/sys, but go list says it does not"},
		{append(slices.Clone(agree), p("relay", "github.com/nats-io/nats.go")), "relay imports github.com/nats-io/nats.go, which no row"},
		{append(slices.Clone(agree), p("queue", "golang.org/x/system")), "queue imports golang.org/x/system, which no row"},
		{agree[:2], "ARCHITECTURE.md says the root imports golang.org/x/time"},
	} {
		bad := checkDocImports(m, c.pkgs, rows)
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, c.want) }) {
			t.Errorf("reported %q, want a line with %q", bad, c.want)
		}
	}
	if _, err := markedTable("no marker here", "imports"); err == nil {
		t.Error("a document without the marker: no error")
	}

	parse := func(path, src string) goFile {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		return goFile{path, fset, f}
	}
	files := []goFile{
		parse("ledger/backend.go", "package ledger\nfunc Register(s string) { if s == \"\" { panic(\"nil\") }; panic(\"twice\") }"),
		parse("ledger/sqlite/dialect.go", "package sqlite\ntype dialect struct{}\nfunc (dialect) Migrations() { panic(1) }"),
		parse("queue/dir.go", "package queue\ntype Dir struct{}\nfunc (d *Dir) Recover() {}\ntype Resolver interface{ Resolve() }\nvar ErrGone = 1"),
	}
	panicRows := tableRows("| file | function | why |\n|---|---|---|\n" +
		"| `ledger/backend.go` | `Register` | a programmer error |\n" +
		"| `ledger/sqlite/dialect.go`, `ledger/postgres/dialect.go` | `Migrations` | a constant path |\n")
	found := panics(files)
	bad := checkDocPanics(panicRows, found)
	if want := []string{"ARCHITECTURE.md says ledger/postgres/dialect.go: Migrations panics, but it does not (or no longer exists)"}; !slices.Equal(bad, want) {
		t.Errorf("panics: reported %q, want %q", bad, want)
	}
	withNew := append(slices.Clone(files), parse("console/web.go", "package console\nvar x = func() int { panic(0) }()\nfunc assets() { panic(1) }"))
	bad = checkDocPanics(panicRows[:1], panics(withNew))
	for _, want := range []string{
		"console/web.go: assets panics, but ARCHITECTURE.md's list",
		"console/web.go: (package level) panics, but",
		"ledger/sqlite/dialect.go: Migrations panics, but",
	} {
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, want) }) {
			t.Errorf("panics: reported %q, want a line with %q", bad, want)
		}
	}

	names := declared(files)
	cells := []string{
		"queue/dir.go `Dir.Recover`, `Recover`, `Resolver.Resolve`, `ErrGone`, `queue.ErrGone`, `Register(s)`; not Go: `inbox/`, `ON CONFLICT (msg_id)`, `_txlock=immediate`, `msg_id`, `~N`",
		"`Dir.Claim` (no such method), `recoverSession`, `sqlite.Register`",
	}
	bad = checkDocNames(cells, names)
	want := []string{"`Dir.Claim`", "`recoverSession`", "`sqlite.Register`"}
	if len(bad) != len(want) {
		t.Errorf("names: reported %q, want one line for each of %q", bad, want)
	}
	for _, w := range want {
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, w) }) {
			t.Errorf("names: reported %q, want a line with %s", bad, w)
		}
	}
}
