//go:build linux

package e2e

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// listenValue is an address given to --listen or SPOOL_LISTEN in a
// document, an example or spool's help.
var listenValue = regexp.MustCompile(`(?:--listen[ =]|SPOOL_LISTEN=)([^\s` + "`" + `'"),]+)`)

// everyInterface reports whether a --listen address binds every
// interface: no host, or an unspecified one (0.0.0.0, ::).
func everyInterface(addr string) bool {
	host, _, err := net.SplitHostPort(strings.ReplaceAll(addr, "%i", "1"))
	if err != nil {
		return false // ADDR, HOST:PORT and other placeholders
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// TestListenRecommendsLoopback: no document, example, unit or help text
// recommends a --listen address that binds every interface (":9461"
// exposes unauthenticated endpoints on the public interface too); the
// several-consumers recipe of OPERATIONS.md and the unit name the
// loopback address, and OPERATIONS.md says how to expose the port on
// purpose.
func TestListenRecommendsLoopback(t *testing.T) {
	t.Parallel()
	texts := map[string]string{}
	read := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		texts[path] = string(b)
	}
	read("../../README.md")
	for _, root := range []string{"../../docs", "../../examples"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch filepath.Ext(path) {
			case ".md", ".yml", ".yaml", ".service", ".cron", ".sh", ".env", ".conf":
				read(path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range []string{"consume", "serve"} {
		texts["spool help "+cmd] = mustRun(t, 0, "help", cmd).stdout
		texts["spool "+cmd+" -h"] = run(t, cmd, "-h").stdout + run(t, cmd, "-h").stderr
	}
	seen := 0
	for where, text := range texts {
		for _, m := range listenValue.FindAllStringSubmatch(text, -1) {
			seen++
			if everyInterface(m[1]) {
				t.Errorf("%s recommends %q, which binds every interface: recommend 127.0.0.1:PORT", where, m[0])
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d --listen addresses in the docs: the pattern misses them", seen)
	}
	for where, want := range map[string]string{
		"../../docs/OPERATIONS.md":                       "--listen\n127.0.0.1:946%i",
		"../../examples/ops/spool-consume@.service":      "--listen 127.0.0.1:946%i",
		"../../examples/ops/prometheus/prometheus.yml":   "--listen 127.0.0.1:9461",
		"../../docs/OPERATIONS.md#expose on purpose":     "To let a Prometheus on another host",
		"../../docs/OPERATIONS.md#every interface named": "binds\nevery interface",
	} {
		path, _, _ := strings.Cut(where, "#")
		if !strings.Contains(texts[path], want) {
			t.Errorf("%s does not say %q", where, want)
		}
	}
}
