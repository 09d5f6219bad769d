package queueopen_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/queueopen"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://spool:s3cret@db:5432/q":                "postgres://spool:xxxxx@db:5432/q",
		"postgres://spool@db/q?sslmode=disable&password=x": "postgres://spool@db/q?password=xxxxx&sslmode=disable",
		"redis://:pw@127.0.0.1:6379/0":                     "redis://:xxxxx@127.0.0.1:6379/0",
		"https://hooks.example/x?token=abc":                "https://hooks.example/x?token=xxxxx",
		"https://hooks.example/x?id=1":                     "https://hooks.example/x?id=1",
		"/srv/q/ledger.db":                                 "/srv/q/ledger.db",
		"exit 75":                                          "exit 75",
	} {
		if got := queueopen.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSettingsPrecedence: a contract value comes from the option that set
// it (a flag or its variable), else spool.conf, else the default; the
// other options from where the program got them; the format is one
// setting; the groups are SettingGroups' in order, the rest last; a URL's
// password is masked.
func TestSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, queueopen.ConfigName),
		[]byte(`{"key_field": "event_id", "order_field": "account", "headers": {"trace": "tp"}, "format": "csv"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	seq, order := "position", "client"
	c, conf, err := queueopen.LoadContract(dir, queueopen.Override{SeqField: &seq, OrderField: &order})
	if err != nil {
		t.Fatal(err)
	}
	opts := []queueopen.OptionValue{
		{Name: "zzz-unlisted", Value: true, From: queueopen.FromDefault},
		{Name: "workers", Value: 8, From: "SPOOL_WORKERS"},
		{Name: "db", Value: "postgres://u:pw@h/q", From: queueopen.FromFlag},
		{Name: "key", Value: "", From: queueopen.FromDefault},
		{Name: "order-key", Value: order, From: queueopen.FromFlag},
		{Name: "seq", Value: seq, From: "SPOOL_SEQ"},
		{Name: "amount", Value: "", From: queueopen.FromDefault},
		{Name: "format", Value: "", From: queueopen.FromDefault},
		{Name: "watch", Value: false, From: queueopen.FromDefault},
	}
	got := map[string]queueopen.Setting{}
	var names []string
	for _, s := range queueopen.Settings(opts, &c, conf, conf) {
		got[s.Name] = s
		names = append(names, s.Name)
	}
	for name, want := range map[string][2]string{
		"key":       {"event_id", queueopen.FromFile},
		"order-key": {"client", queueopen.FromFlag},
		"seq":       {"position", "SPOOL_SEQ"},
		"amount":    {"amount", queueopen.FromDefault},
		"headers":   {"trace=tp", queueopen.FromFile},
		"format":    {"csv", queueopen.FromFile},
		"workers":   {"8", "SPOOL_WORKERS"},
		"db":        {"postgres://u:xxxxx@h/q", queueopen.FromFlag},
		"watch":     {"false", queueopen.FromDefault},
	} {
		if s := got[name]; s.Text() != want[0] || s.From != want[1] {
			t.Errorf("%s = %q from %q, want %q from %q", name, s.Text(), s.From, want[0], want[1])
		}
	}
	if want := "key order-key seq amount headers format watch db workers zzz-unlisted"; strings.Join(names, " ") != want {
		t.Errorf("order %q, want %q", strings.Join(names, " "), want)
	}
	if s := queueopen.Settings(opts, nil, nil, nil); len(s) != 4 {
		t.Errorf("without a contract: %d settings, want the 4 that are not the contract's: %+v", len(s), s)
	}

	var b bytes.Buffer
	if err := queueopen.WriteSettings(&b, queueopen.Settings(opts[1:3], nil, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if want := "Service:\n  --db        postgres://u:xxxxx@h/q  flag\nConcurrency:\n  --workers   8                       SPOOL_WORKERS\n"; b.String() != want {
		t.Errorf("WriteSettings:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	queueopen.LogSettings(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})), "/q", []queueopen.Setting{{Name: "min-age", Value: time.Second, From: "SPOOL_MIN_AGE"}, {Name: "watch", Value: false, From: queueopen.FromDefault}})
	if want := "level=INFO msg=configuration queue=/q settings.min_age=1s settings.watch=false from.min_age=SPOOL_MIN_AGE\n"; b.String() != want {
		t.Errorf("LogSettings: %q, want %q", b.String(), want)
	}
}
