package queueopen_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/fsck"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queueopen"
)

func TestParseWindow(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30d", 30 * 24 * time.Hour, true},
		{"36h", 36 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"1.5h", 90 * time.Minute, true},
		{"0s", 0, false},
		{"0d", 0, false},
		{"-1h", 0, false},
		{"-1d", 0, false},
		{"+1d", 0, false},
		{"1d-2h", 0, false},
		{"30", 0, false},
		{"d", 0, false},
		{"1.5d", 0, false},
		{"30days", 0, false},
		{"", 0, false},
		{"999999999d", 0, false},
		{"106751d", 106751 * 24 * time.Hour, true},
		{"106751d24h", 0, false},
	} {
		got, err := queueopen.ParseWindow(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("queueopen.ParseWindow(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// TestPruneAudited: a prune is an audited action whose row holds the
// window, the horizon and the counts, and OnPruned hears the horizon
// before; a dry run writes no row.
func TestPruneAudited(t *testing.T) {
	ctx := context.Background()
	dir := newQueue(t)
	if _, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write}); err != nil {
		t.Fatal(err)
	}
	prune := func(dry bool) (heard time.Time, err error) {
		_, before, err := queueopen.Prune(ctx, dir, queueopen.Options{}, queueopen.PruneOptions{
			OlderThan: "30d", Window: 30 * 24 * time.Hour, DryRun: dry,
			Audited:  queueopen.Audited{Who: ledger.AuditEntry{Actor: "os:ann", Via: ledger.AuditCLI}, By: "test"},
			OnPruned: func(_ fsck.Pruned, b time.Time) { heard = b },
		})
		if err == nil && !heard.Equal(before) {
			t.Errorf("OnPruned heard %v, Prune returned %v", heard, before)
		}
		return heard, err
	}
	rows := func() []ledger.AuditRow {
		l, err := queueopen.OpenLedger(ctx, dir, queueopen.Options{Use: queueopen.Read})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		all, err := l.Audit().List(ctx, ledger.AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var out []ledger.AuditRow
		for _, r := range all {
			if r.Action == queueopen.AuditPrune {
				out = append(out, r)
			}
		}
		return out
	}
	if _, err := prune(true); err != nil || len(rows()) != 0 {
		t.Fatalf("dry run: %v, %d rows; want none", err, len(rows()))
	}
	before, err := prune(false)
	if err != nil {
		t.Fatal(err)
	}
	r := rows()
	if len(r) != 1 || r[0].Outcome != ledger.AuditOK || r[0].Actor != "os:ann" ||
		!strings.Contains(r[0].Selection, `"older_than":"30d"`) || !strings.Contains(r[0].Selection, before.UTC().Format(time.RFC3339)) {
		t.Fatalf("rows %+v: want one ok row by os:ann with the window and the horizon", r)
	}
	if _, ok := r[0].Counts["kept"]; !ok {
		t.Errorf("counts %v: want kept without Files", r[0].Counts)
	}
}
