package spool_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The package's doc names every runnable example's subject as a doc link,
// so that a reader of `go doc` learns they exist, and where.
func TestDocLinksExamples(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	paths, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	examples := doc.Examples(files...)
	if len(examples) == 0 {
		t.Fatal("no examples found")
	}
	for _, ex := range examples {
		name, _, _ := strings.Cut(ex.Name, "_") // Consumer_Drain: Consumer
		if rest, ok := strings.CutPrefix(ex.Name, name+"_"); ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
			name += "." + rest // a method: Consumer.Drain
		}
		if !strings.Contains(string(src), "["+name+"]") {
			t.Errorf("doc.go does not link [%s], the subject of Example%s", name, ex.Name)
		}
	}
}
