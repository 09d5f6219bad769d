package ledgertest

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// testAuditLifecycle: AuditLog.Begin writes a started row with everything the
// entry said, AuditLog.End closes it once with its outcome, counts, detail and
// end time, AuditLog.Record writes a closed row in one call, and AuditLog.List
// gives them back oldest first with each of its filters; bad entries and
// outcomes are refused and write nothing.
func testAuditLifecycle(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC)
	e := ledger.AuditEntry{At: t0, Actor: "alice", Via: ledger.AuditCLI, Action: "replay",
		Selection: `{"reason":"parse","names":["a.json"]}`, Host: "h1", PID: 4242}
	id, err := db.Audit().Begin(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("Audit().List = %v, %v; want one row", rows, err)
	}
	r := rows[0]
	if r.ID != id || r.Outcome != ledger.AuditStarted || !r.At.Equal(t0) || r.Actor != "alice" || r.Role != "" ||
		r.Via != "cli" || r.Action != "replay" || r.Selection != e.Selection || r.Host != "h1" || r.PID != 4242 ||
		r.Task != 0 || !r.Ended.IsZero() || len(r.Counts) != 0 || r.Detail != "" {
		t.Fatalf("started row = %+v, want entry %+v as started (id %d)", r, e, id)
	}
	before := time.Now().Add(-time.Second)
	counts := ledger.AuditCounts{"selected": 3, "done": 2, "skipped": 1}
	if err := db.Audit().End(ctx, id, ledger.AuditOK, counts, "2 replayed, 1 gone"); err != nil {
		t.Fatal(err)
	}
	if err := db.Audit().End(ctx, id, ledger.AuditFailed, nil, "again"); !errors.Is(err, ledger.ErrAuditClosed) {
		t.Errorf("second Audit().End = %v, want ErrAuditClosed", err)
	}
	if err := db.Audit().End(ctx, id+1000, ledger.AuditOK, nil, ""); !errors.Is(err, ledger.ErrAuditClosed) {
		t.Errorf("Audit().End of an unknown row = %v, want ErrAuditClosed", err)
	}
	rows, err = db.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("Audit().List = %v, %v", rows, err)
	}
	r = rows[0]
	if r.Outcome != ledger.AuditOK || !maps.Equal(r.Counts, counts) || r.Detail != "2 replayed, 1 gone" ||
		r.Ended.Before(before) || r.Ended.After(time.Now().Add(time.Second)) {
		t.Fatalf("closed row = %+v, want ok with %v", r, counts)
	}

	// A refusal in one call, with a role, a task and an empty selection.
	t1 := t0.Add(time.Hour)
	rid, err := db.Audit().Record(ctx, ledger.AuditEntry{At: t1, Actor: "bob", Role: "operator", Via: ledger.AuditHTTP,
		Action: "approve", Task: 7}, ledger.AuditRefused, ledger.AuditCounts{"selected": 12}, "own request")
	if err != nil {
		t.Fatal(err)
	}
	if rid <= id {
		t.Errorf("second row's id %d not above the first's %d", rid, id)
	}
	// Bad entries and outcomes write nothing.
	for _, bad := range []ledger.AuditEntry{
		{Via: "cli", Action: "flush"},
		{Actor: "a", Action: "flush"},
		{Actor: "a", Via: "cli"},
		{Actor: "a", Via: "cli", Action: "flush", Selection: `{"names":`},
	} {
		if _, err := db.Audit().Begin(ctx, bad); err == nil {
			t.Errorf("Audit().Begin(%+v) = nil error", bad)
		}
	}
	if _, err := db.Audit().Record(ctx, e, ledger.AuditStarted, nil, ""); err == nil {
		t.Error("Audit().Record with outcome started: nil error")
	}
	sid, err := db.Audit().Begin(ctx, ledger.AuditEntry{At: t1.Add(time.Hour), Actor: "carol", Via: "cli", Action: "flush"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Audit().End(ctx, sid, "done", nil, ""); err == nil {
		t.Error("Audit().End with an unknown outcome: nil error")
	}
	// An interrupted row may still get its true outcome, once.
	if err := db.Audit().End(ctx, sid, ledger.AuditInterrupted, nil, "process gone"); err != nil {
		t.Fatal(err)
	}
	if err := db.Audit().End(ctx, sid, ledger.AuditFailed, ledger.AuditCounts{"done": 0}, "disk full"); err != nil {
		t.Fatalf("Audit().End after interrupted: %v", err)
	}
	if err := db.Audit().End(ctx, sid, ledger.AuditOK, nil, ""); !errors.Is(err, ledger.ErrAuditClosed) {
		t.Errorf("Audit().End after failed = %v, want ErrAuditClosed", err)
	}

	all, err := db.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil || len(all) != 3 {
		t.Fatalf("Audit().List = %d rows, %v; want 3", len(all), err)
	}
	if all[1].ID != rid || all[1].Outcome != ledger.AuditRefused || all[1].Role != "operator" || all[1].Via != "http" ||
		all[1].Task != 7 || all[1].Selection != "{}" || all[1].Counts["selected"] != 12 || !all[1].Ended.Equal(t1) {
		t.Errorf("refusal row = %+v", all[1])
	}
	if all[2].ID != sid || all[2].Outcome != ledger.AuditFailed || all[2].Detail != "disk full" {
		t.Errorf("third row = %+v, want failed: disk full", all[2])
	}
	ids := func(q ledger.AuditQuery) []int64 {
		t.Helper()
		rs, err := db.Audit().List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	for name, c := range map[string]struct {
		q    ledger.AuditQuery
		want []int64
	}{
		"since":         {ledger.AuditQuery{Since: t1}, []int64{rid, sid}},
		"since exact":   {ledger.AuditQuery{Since: t0}, []int64{id, rid, sid}},
		"after":         {ledger.AuditQuery{After: id}, []int64{rid, sid}},
		"limit":         {ledger.AuditQuery{Limit: 2}, []int64{id, rid}},
		"after limit":   {ledger.AuditQuery{After: id, Limit: 1}, []int64{rid}},
		"outcome":       {ledger.AuditQuery{Outcome: ledger.AuditRefused}, []int64{rid}},
		"action":        {ledger.AuditQuery{Action: "flush"}, []int64{sid}},
		"none after":    {ledger.AuditQuery{After: sid}, nil},
		"since to none": {ledger.AuditQuery{Since: t1.Add(2 * time.Hour)}, nil},
	} {
		if got := ids(c.q); !slices.Equal(got, c.want) {
			t.Errorf("%s: Audit().List ids = %v, want %v", name, got, c.want)
		}
	}
}

// testAuditFilters: AuditLog.List's Actor keeps one identity's rows, without
// case, and a name without a realm keeps that name's rows in every realm
// (LIKE's wildcards in it taken as text); Until bounds At, before it.
func testAuditFilters(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var ids []int64
	for i, actor := range []string{"token:olga", "os:Olga", "olga", "token:ada", "token:o_ga", "token:xolga", "token:100%"} {
		id, err := db.Audit().Record(ctx, ledger.AuditEntry{At: t0.Add(time.Duration(i) * time.Minute), Actor: actor,
			Via: ledger.AuditHTTP, Action: "read"}, ledger.AuditRefused, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for name, c := range map[string]struct {
		q    ledger.AuditQuery
		want []int64
	}{
		"realm":            {ledger.AuditQuery{Actor: "token:olga"}, []int64{ids[0]}},
		"realm any case":   {ledger.AuditQuery{Actor: "OS:olga"}, []int64{ids[1]}},
		"every realm":      {ledger.AuditQuery{Actor: "OLGA"}, []int64{ids[0], ids[1], ids[2]}},
		"underscore":       {ledger.AuditQuery{Actor: "o_ga"}, []int64{ids[4]}},
		"percent":          {ledger.AuditQuery{Actor: "100%"}, []int64{ids[6]}},
		"no such actor":    {ledger.AuditQuery{Actor: "olg"}, nil},
		"until":            {ledger.AuditQuery{Until: t0.Add(2 * time.Minute)}, []int64{ids[0], ids[1]}},
		"since until":      {ledger.AuditQuery{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute)}, []int64{ids[1], ids[2]}},
		"actor until":      {ledger.AuditQuery{Actor: "olga", Until: t0.Add(time.Minute)}, []int64{ids[0]}},
		"actor newest":     {ledger.AuditQuery{Actor: "olga", Newest: true, Limit: 2}, []int64{ids[2], ids[1]}},
		"actor before":     {ledger.AuditQuery{Actor: "olga", Newest: true, Before: ids[2]}, []int64{ids[1], ids[0]}},
		"actor after":      {ledger.AuditQuery{Actor: "olga", After: ids[0]}, []int64{ids[1], ids[2]}},
		"until to nothing": {ledger.AuditQuery{Until: t0}, nil},
	} {
		rs, err := db.Audit().List(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []int64
		for _, r := range rs {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: Audit().List ids = %v, want %v", name, got, c.want)
		}
	}
}

// testAuditText: producer-chosen text in an entry (a file name in the
// selection, a detail quoting one) is stored as valid UTF-8 on every
// engine, and escape sequences come back exactly, for the reports to
// escape.
func testAuditText(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	sel := `{"names":["\u001b]0;x\u0007.json","caf` + "\xe9" + `.json"]}`
	id, err := db.Audit().Begin(ctx, ledger.AuditEntry{Actor: "r\xe9mi", Via: "cli", Action: "replay", Selection: sel})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Audit().End(ctx, id, ledger.AuditFailed, nil, "rename \x1b[2J\x00.json: gone"); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("Audit().List = %v, %v", rows, err)
	}
	r := rows[0]
	if r.Actor != "r\uFFFDmi" || r.Detail != "rename \x1b[2J\uFFFD.json: gone" ||
		r.Selection != `{"names":["\u001b]0;x\u0007.json","caf`+"\uFFFD"+`.json"]}` {
		t.Errorf("row = actor %q, detail %q, selection %q", r.Actor, r.Detail, r.Selection)
	}
}

// testAuditConcurrent: rows begun and ended from several goroutines at
// once each get their own id, in the order AuditLog.List returns them, and
// every one keeps its own outcome.
func testAuditConcurrent(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := db.Audit().Begin(ctx, ledger.AuditEntry{Actor: "op", Via: "cli", Action: "flush", PID: i + 1})
			if err == nil {
				err = db.Audit().End(ctx, id, ledger.AuditOK, ledger.AuditCounts{"done": int64(i + 1)}, "")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil || len(rows) != n {
		t.Fatalf("Audit().List = %d rows, %v; want %d", len(rows), err, n)
	}
	seen := map[int]bool{}
	for i, r := range rows {
		if i > 0 && r.ID <= rows[i-1].ID {
			t.Errorf("ids not increasing: %d after %d", r.ID, rows[i-1].ID)
		}
		if r.Outcome != ledger.AuditOK || r.Counts["done"] != int64(r.PID) || seen[r.PID] {
			t.Errorf("row %+v: want ok with done = pid, each pid once", r)
		}
		seen[r.PID] = true
	}
}

// testAuditBind: BindAudited audits the first bind of a ledger to its
// queue once, as the entry's actor, with the queue's identity, in the
// transaction that binds: of two handles binding at once, exactly one row;
// a later bind, a check, and a Bind without an entry add none; a new
// ledger accepted on purpose (BindNew) is audited as new-ledger.
func testAuditBind(t *testing.T, a, b *ledger.DB) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(dir); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	e := ledger.AuditEntry{Actor: "ops", Via: ledger.AuditCLI, Host: "h", PID: 7}
	var wg sync.WaitGroup
	ids := make([]string, 2)
	errs := make([]error, 2)
	for i, db := range []*ledger.DB{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = ledger.BindAudited(ctx, db, d, ledger.BindWrite, e)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil || ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("two binds at once: %q, %v", ids, err)
	}
	if _, err := ledger.BindAudited(ctx, a, d, ledger.BindWrite, e); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.BindAudited(ctx, b, d, ledger.BindCheck, e); err != nil {
		t.Fatal(err)
	}
	rows, err := a.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("audit after binds: %+v, want one bind row", rows)
	}
	r := rows[0]
	if r.Action != ledger.AuditBind || r.Actor != "ops" || r.Outcome != ledger.AuditOK || r.Host != "h" || r.PID != 7 ||
		r.Selection != `{"queue_id":"`+ids[0]+`"}` || r.Ended.IsZero() {
		t.Errorf("bind row: %+v", r)
	}
	// A new ledger on purpose: audited, once.
	if err := os.WriteFile(filepath.Join(dir, "done", "old.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := ledger.BindAudited(ctx, a, d, ledger.BindNew, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ledger.Bind(ctx, a, d, ledger.BindNew); err != nil {
		t.Fatal(err)
	}
	rows, err = a.Audit().List(ctx, ledger.AuditQuery{After: r.ID})
	if err != nil || len(rows) != 1 || rows[0].Action != ledger.AuditNewLedger || rows[0].Actor != "ops" {
		t.Fatalf("audit after BindNew: %+v, %v; want one new-ledger row", rows, err)
	}
}
