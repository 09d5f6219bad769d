//go:build linux

package e2e

import (
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// make install puts every file where the README's install paragraph says,
// under DESTDIR and PREFIX, and make uninstall takes each away again. The
// binary is the one under test (SPOOL_BIN), so that the test does not
// build another.
func TestMakeInstall(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make here")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The paragraph that begins "Install", and the paths it names in
	// backquotes: absolute ones, and those under /usr/local.
	para := regexp.MustCompile(`(?s)\nInstall .*?\n\n`).FindString(string(readme))
	if !strings.Contains(para, "`/usr/local`") {
		t.Fatalf("the README's install paragraph does not name the prefix /usr/local:\n%s", para)
	}
	var said []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(para, -1) {
		p := m[1]
		if rel, ok := strings.CutPrefix(p, "/usr/local/"); ok {
			said = append(said, rel)
		} else if strings.HasPrefix(p, "share/") {
			said = append(said, p)
		}
	}
	if len(said) < 5 {
		t.Fatalf("the README's install paragraph names %q: want the binary, the manual pages and three completions", said)
	}

	runMake := func(args ...string) {
		t.Helper()
		out, err := exec.Command("make", append([]string{"-C", root, "SPOOL_BIN=" + spoolBin}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("make %q: %v\n%s", args, err, out)
		}
	}
	dest := t.TempDir()
	runMake("install", "DESTDIR="+dest)
	prefix := filepath.Join(dest, "usr", "local")
	var installed []string
	err = filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(prefix, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Errorf("installed %s, outside the prefix /usr/local", p)
			return nil
		}
		installed = append(installed, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o644)
		if rel == "bin/spool" {
			want = 0o755
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", rel, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range installed {
		ok := false
		for _, pattern := range said {
			if m, _ := path.Match(pattern, rel); m {
				ok = true
			}
		}
		if !ok {
			t.Errorf("make install put %s where the README does not say (it says %q)", rel, said)
		}
	}
	for _, pattern := range said {
		n := 0
		for _, rel := range installed {
			if m, _ := path.Match(pattern, rel); m {
				n++
			}
		}
		if n == 0 {
			t.Errorf("the README says %s, which make install did not put there", pattern)
		}
	}
	for _, want := range []string{"bin/spool", "share/man/man1/spool.1", "share/man/man1/spool-consume.1", "share/man/man1/spool-check.1"} {
		if _, err := os.Stat(filepath.Join(prefix, want)); err != nil {
			t.Errorf("make install: %v", err)
		}
	}
	if zsh, err := os.ReadFile(filepath.Join(prefix, "share/zsh/site-functions/_spool")); err != nil || !strings.HasPrefix(string(zsh), "#compdef spool\n") {
		t.Errorf("the zsh completion is no #compdef function file: %v\n%.80s", err, zsh)
	}
	if r := (spoolAt{bin: filepath.Join(prefix, "bin", "spool")}).run(t, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "spool ") {
		t.Errorf("the installed binary:\n%s", r)
	}

	runMake("uninstall", "DESTDIR="+dest)
	err = filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("make uninstall left %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// PREFIX moves it all.
	dest = t.TempDir()
	runMake("install", "DESTDIR="+dest, "PREFIX=/usr")
	for _, want := range []string{"usr/bin/spool", "usr/share/man/man1/spool.1", "usr/share/bash-completion/completions/spool"} {
		if _, err := os.Stat(filepath.Join(dest, want)); err != nil {
			t.Errorf("make install PREFIX=/usr: %v", err)
		}
	}
}
