//go:build linux

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// The --sql handler end to end: its statements commit or roll back with
// the processed row, once per msg_id, on SQLite and PostgreSQL ledgers.

// TestSQLHandlerFailureRollsBack: when a --sql statement fails (a CHECK
// constraint of a business table), the statements before it and the
// processed row roll back with it, and the message is a dead letter.
func TestSQLHandlerFailureRollsBack(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	prepareLedger(t, q,
		`CREATE TABLE audit (msg_id TEXT PRIMARY KEY, order_no TEXT NOT NULL)`,
		`CREATE TABLE balances (order_no TEXT PRIMARY KEY, cents INTEGER NOT NULL CHECK (cents >= 0))`)
	sqlFile := writeFile(t, state, "book.sql", `-- Every message is audited, then booked; a balance never goes negative.
INSERT INTO audit (msg_id, order_no) VALUES (:msg_id, :order_no);
INSERT INTO balances (order_no, cents) VALUES (:order_no, CAST(round(:amount * 100) AS INTEGER))
    ON CONFLICT (order_no) DO UPDATE SET cents = cents + excluded.cents;
`)
	putMessage(t, q, "a.json", orderMessage("A", "O1", 1, "10.00"))
	putMessage(t, q, "b.json", orderMessage("B", "O1", 2, "5.00"))
	putMessage(t, q, "c.json", orderMessage("C", "O1", 3, "-20.00")) // O1 below zero, in any order
	putMessage(t, q, "d.json", orderMessage("D", "O2", 1, "-1.00"))  // a new order below zero
	r := mustRun(t, 0, "consume", q, "--sql", sqlFile)
	if st := parseStats(t, r); st.Processed != 2 || st.DeadLetters != 2 {
		t.Fatalf("stats %+v, want 2 processed, 2 dead letters\n%s", st, r)
	}
	if got := names(t, q, errorStage); len(got) != 2 || got[0] != "c.json" || got[1] != "d.json" {
		t.Errorf("error/ holds %q, want c.json and d.json", got)
	}
	db := openLedger(t, q)
	for _, f := range []string{"c.json", "d.json"} {
		if dl := deadLetterOf(t, db, f); dl.Reason != "handler" || !strings.Contains(dl.Detail, "statement 2 (line 3)") || !strings.Contains(dl.Detail, "CHECK constraint failed") {
			t.Errorf("dead letter of %s: %+v, want reason handler, the failing statement and the constraint", f, dl)
		}
	}
	rows := processedRows(t, db)
	if len(rows) != 2 || rows["A"].MsgID == "" || rows["B"].MsgID == "" {
		t.Errorf("processed holds %v, want A and B only: a failed handler rolls back its row", rows)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM audit WHERE msg_id IN ('A', 'B')`); n != 2 || count(t, db, `SELECT COUNT(*) FROM audit`) != 2 {
		t.Errorf("audit holds rows of failed messages: their first statement was not rolled back")
	}
	if got := count(t, db, `SELECT cents FROM balances WHERE order_no = 'O1'`); got != 1500 {
		t.Errorf("O1 balance %d cents, want 1500", got)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM balances WHERE order_no = 'O2'`); n != 0 {
		t.Error("O2 has a balance row from a failed message")
	}
}

// TestSQLHandlerUpsertOnce: a --sql upsert runs once per msg_id whatever the
// duplicates, within a run and across runs, with every parameter bound as
// documented.
func TestSQLHandlerUpsertOnce(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	prepareLedger(t, q,
		`CREATE TABLE orders (order_no TEXT PRIMARY KEY, messages INTEGER NOT NULL, last_seq INTEGER NOT NULL)`,
		`CREATE TABLE order_lines (msg_id TEXT PRIMARY KEY, order_no TEXT NOT NULL, seq INTEGER NOT NULL,
			amount TEXT NOT NULL, customer TEXT, items TEXT, note TEXT, file TEXT NOT NULL, payload TEXT NOT NULL)`)
	sqlFile := writeFile(t, state, "orders.sql", `-- One line per message: its PRIMARY KEY would refuse a second run.
INSERT INTO order_lines (msg_id, order_no, seq, amount, customer, items, note, file, payload)
VALUES (:msg_id, :order_no, :seq, :amount, :customer, :items, :note, :file, :payload);
/* The order's running state; a ';' here is no statement's end. */
INSERT INTO orders (order_no, messages, last_seq) VALUES (:order_no, 1, :seq)
ON CONFLICT (order_no) DO UPDATE SET messages = messages + 1, last_seq = max(last_seq, excluded.last_seq);
`)
	a1 := `{"msg_id":"A1","order_no":"A","seq":1,"amount":"12.50","customer":"Zo\u00eb \"Z\"","items":[1,{"sku":"x"}]}`
	msgs := map[string]string{
		"a1.json":        a1,
		"a1-resend.json": a1,
		"a2.json":        `{"msg_id":"A2","order_no":"A","seq":2,"amount":0.10,"note":null}`,
		"a3.json":        `{"msg_id":"A3","order_no":"A","seq":3,"amount":"-3.00","note":"gift"}`,
		"b1.json":        `{"msg_id":"B1","order_no":"B","seq":1,"amount":"1e3"}`,
		"b1-resend.json": `{"msg_id":"B1","order_no":"B","seq":1,"amount":"1e3"}`,
	}
	for name, body := range msgs {
		putMessage(t, q, name, body)
	}
	r := mustRun(t, 0, "consume", q, "--sql", sqlFile)
	if st := parseStats(t, r); st.Processed != 4 || st.Duplicates != 2 || st.DeadLetters != 0 {
		t.Fatalf("first run: %+v, want 4 processed, 2 duplicates\n%s", st, r)
	}
	// A redelivery of A2 and a new message, in a second run.
	src := t.TempDir()
	writeFile(t, src, "a2.json", msgs["a2.json"])
	writeFile(t, src, "b2.json", `{"msg_id":"B2","order_no":"B","seq":2,"amount":"2"}`)
	mustRun(t, 0, "enqueue", q, filepath.Join(src, "a2.json"), filepath.Join(src, "b2.json"))
	r = mustRun(t, 0, "consume", q, "--sql", sqlFile)
	if st := parseStats(t, r); st.Processed != 1 || st.Duplicates != 1 || st.DeadLetters != 0 {
		t.Fatalf("second run: %+v, want 1 processed, 1 duplicate\n%s", st, r)
	}

	db := openLedger(t, q)
	for _, want := range []struct {
		order          string
		messages, last int
	}{{"A", 3, 3}, {"B", 2, 2}} {
		var messages, last int
		if err := db.QueryRow(`SELECT messages, last_seq FROM orders WHERE order_no = ?`, want.order).Scan(&messages, &last); err != nil {
			t.Fatalf("order %s: %v", want.order, err)
		}
		if messages != want.messages || last != want.last {
			t.Errorf("order %s: %d messages, last seq %d; want %d and %d", want.order, messages, last, want.messages, want.last)
		}
	}
	type line struct{ order, amount, customer, items, note, file, payload string }
	got := map[string]line{}
	rows, err := db.Query(`SELECT msg_id, order_no, amount, COALESCE(customer, '<null>'), COALESCE(items, '<null>'),
		COALESCE(note, '<null>'), file, payload FROM order_lines WHERE typeof(seq) = 'integer'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var l line
		if err := rows.Scan(&id, &l.order, &l.amount, &l.customer, &l.items, &l.note, &l.file, &l.payload); err != nil {
			t.Fatal(err)
		}
		got[id] = l
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("order_lines holds %d rows with an integer seq, want 5: %v", len(got), got)
	}
	if l := got["A1"]; l.amount != "12.50" || l.customer != `Zoë "Z"` || l.items != `[1,{"sku":"x"}]` || l.note != "<null>" ||
		(l.file != "a1.json" && l.file != "a1-resend.json") || l.payload != a1 {
		t.Errorf("A1's line: %+v", l)
	}
	if l := got["A2"]; l.amount != "0.10" || l.note != "<null>" || l.file != "a2.json" || l.customer != "<null>" {
		t.Errorf("A2's line (JSON null and absent fields are NULL): %+v", l)
	}
	if l := got["A3"]; l.amount != "-3.00" || l.note != "gift" {
		t.Errorf("A3's line: %+v", l)
	}
	if l := got["B1"]; l.amount != "1e3" {
		t.Errorf("B1's amount %q, want exactly 1e3", l.amount)
	}
	if n := len(processedRows(t, db)); n != 5 {
		t.Errorf("processed holds %d rows, want 5", n)
	}
}

// TestSQLHandlerPostgres: the same --sql file shape on a PostgreSQL ledger
// (a schema of its own): named parameters become $N, a constraint's
// failure rolls back the statements before it and the processed row.
// It needs SPOOL_TEST_POSTGRES (required on CI), like the backend's tests.
func TestSQLHandlerPostgres(t *testing.T) {
	t.Parallel()
	dsn, admin := postgresServer(t)
	schema := postgresSchema(t, admin,
		`CREATE TABLE %s.payments (msg_id TEXT PRIMARY KEY, order_no TEXT NOT NULL,
			amount NUMERIC NOT NULL CHECK (amount >= 0), customer TEXT)`,
		`CREATE TABLE %s.orders (order_no TEXT PRIMARY KEY, payments INTEGER NOT NULL, last_seq INTEGER NOT NULL)`)
	q, state := workQueue(t)
	sqlFile := writeFile(t, state, "orders.sql", `-- Portable: runs unchanged on SQLite.
INSERT INTO payments (msg_id, order_no, amount, customer)
VALUES (:msg_id, :order_no, :amount, :customer);
INSERT INTO orders (order_no, payments, last_seq) VALUES (:order_no, 1, :seq)
ON CONFLICT (order_no) DO UPDATE SET payments = orders.payments + 1,
    last_seq = CASE WHEN excluded.last_seq > orders.last_seq THEN excluded.last_seq ELSE orders.last_seq END;
`)
	a1 := `{"msg_id":"a1","order_no":"A","seq":1,"amount":"12.50","customer":"Zo\u00eb"}`
	putMessage(t, q, "a1.json", a1)
	putMessage(t, q, "a1-resend.json", a1)
	putMessage(t, q, "a2.json", `{"msg_id":"a2","order_no":"A","seq":2,"amount":0.10}`)
	putMessage(t, q, "a3.json", `{"msg_id":"a3","order_no":"A","seq":3,"amount":"-1.00"}`)
	r := mustRun(t, 0, "consume", q, "--db", withSearchPath(t, dsn, schema), "--sql", sqlFile)
	if st := parseStats(t, r); st.Processed != 2 || st.Duplicates != 1 || st.DeadLetters != 1 {
		t.Fatalf("stats %+v, want 2 processed, 1 duplicate, 1 dead letter\n%s", st, r)
	}
	var got []string
	rows, err := admin.Query(`SELECT msg_id, amount::text, COALESCE(customer, '<null>') FROM ` + schema + `.payments ORDER BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, amount, customer string
		if err := rows.Scan(&id, &amount, &customer); err != nil {
			t.Fatal(err)
		}
		got = append(got, id+" "+amount+" "+customer)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a1 12.50 Zoë", "a2 0.10 <null>"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("payments %q, want %q", got, want)
	}
	var payments, last, processed int
	if err := admin.QueryRow(`SELECT payments, last_seq FROM `+schema+`.orders WHERE order_no = 'A'`).Scan(&payments, &last); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(`SELECT COUNT(*) FROM ` + schema + `.processed`).Scan(&processed); err != nil {
		t.Fatal(err)
	}
	if payments != 2 || last != 2 || processed != 2 {
		t.Errorf("order A: %d payments, last seq %d; processed rows %d; want 2, 2, 2", payments, last, processed)
	}
	var reason, detail string
	if err := admin.QueryRow(`SELECT reason, detail FROM `+schema+`.deliveries WHERE outcome = 'dead-letter' AND file = 'a3.json'`).Scan(&reason, &detail); err != nil {
		t.Fatal(err)
	}
	if reason != "handler" || !strings.Contains(detail, "violates check constraint") {
		t.Errorf("dead letter of a3.json: %s %q", reason, detail)
	}
}

// TestSQLTimeoutPostgres: on a PostgreSQL ledger a --sql statement still
// running at --sql-timeout is cancelled by the server; the message is a
// transient failure (its savepoint rolled back, retried until
// retries-exhausted here), and the rest of its batch commits. On SQLite
// the flag is refused, as is a timeout at or above the claim lease.
func TestSQLTimeoutPostgres(t *testing.T) {
	t.Parallel()
	dsn, admin := postgresServer(t)
	schema := postgresSchema(t, admin, `CREATE TABLE %s.seen (msg_id TEXT PRIMARY KEY)`)
	q, state := workQueue(t)
	sqlFile := writeFile(t, state, "slow.sql", `INSERT INTO seen (msg_id) VALUES (:msg_id);
SELECT pg_sleep(CASE WHEN :msg_id = 'slow' THEN 5 ELSE 0 END);
`)
	putMessage(t, q, "a.json", orderMessage("a", "A", 1, "1"))
	putMessage(t, q, "slow.json", orderMessage("slow", "A", 2, "1"))
	putMessage(t, q, "b.json", orderMessage("b", "A", 3, "1"))
	db := withSearchPath(t, dsn, schema)
	// That the server cut the 5 s statement short shows in the dead
	// letter's detail (PostgreSQL's "canceling statement due to statement
	// timeout"), not in the wall time, which a loaded machine stretches.
	r := mustRun(t, 0, "consume", q, "--db", db, "--sql", sqlFile, "--sql-timeout", "200ms",
		"--retry-max", "2", "--retry-base", "10ms", "--retry-cap", "10ms", "--retry-wait", "1m")
	if st := parseStats(t, r); st.Processed != 2 || st.DeadLetters != 1 {
		t.Fatalf("stats %+v, want 2 processed, slow dead-lettered\n%s", st, r)
	}
	var reason, detail string
	if err := admin.QueryRow(`SELECT reason, detail FROM `+schema+`.deliveries WHERE outcome = 'dead-letter'`).Scan(&reason, &detail); err != nil {
		t.Fatal(err)
	}
	if reason != "retries-exhausted" || !strings.Contains(detail, "statement timeout") {
		t.Errorf("dead letter: %s %q, want retries-exhausted after a statement timeout", reason, detail)
	}
	var seen []string
	rows, err := admin.Query(`SELECT msg_id FROM ` + schema + `.seen ORDER BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, id)
	}
	if strings.Join(seen, ",") != "a,b" {
		t.Errorf("seen %v: want a and b, the cancelled message's insert rolled back", seen)
	}
	// On SQLite, and beyond the lease: refused before anything is consumed.
	q2, _ := workQueue(t)
	putMessage(t, q2, "a.json", orderMessage("a", "A", 1, "1"))
	for _, args := range [][]string{
		{"consume", q2, "--sql", sqlFile, "--sql-timeout", "1s"},
		{"consume", q2, "--db", db, "--sql", sqlFile, "--sql-timeout", "2m"},
	} {
		r := run(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--sql-timeout") {
			t.Errorf("%q: want exit 2 naming --sql-timeout\n%s", args, r)
		}
	}
	if n := countNames(t, q2, inbox); n != 1 {
		t.Errorf("inbox/ of the refused runs holds %d messages, want 1", n)
	}
}

// TestSQLHandlerMySQL: a --sql file on a MariaDB ledger (a database of its
// own): named parameters become positional ?, one used twice included; a
// constraint's failure rolls back the statements before it and the
// processed row; and --sql-timeout is refused with the reason. It needs
// SPOOL_TEST_MYSQL (required on CI), like the backend's tests.
func TestSQLHandlerMySQL(t *testing.T) {
	t.Parallel()
	dsn, db := mysqlDatabase(t)
	for _, s := range []string{
		`CREATE TABLE payments (msg_id VARCHAR(255) PRIMARY KEY, order_no VARCHAR(255) NOT NULL,
			amount DECIMAL(12,2) NOT NULL CHECK (amount >= 0), customer TEXT, note TEXT)`,
		`CREATE TABLE orders (order_no VARCHAR(255) PRIMARY KEY, payments INTEGER NOT NULL, last_seq INTEGER NOT NULL)`,
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	q, state := workQueue(t)
	sqlFile := writeFile(t, state, "orders.sql", `-- MariaDB's upsert.
INSERT INTO payments (msg_id, order_no, amount, customer, note)
VALUES (:msg_id, :order_no, :amount, :customer, :order_no || '/' || :msg_id);
INSERT INTO orders (order_no, payments, last_seq) VALUES (:order_no, 1, :seq)
ON DUPLICATE KEY UPDATE payments = payments + 1, last_seq = GREATEST(last_seq, VALUES(last_seq));
`)
	a1 := `{"msg_id":"a1","order_no":"A","seq":1,"amount":"12.50","customer":"Zo\u00eb"}`
	putMessage(t, q, "a1.json", a1)
	putMessage(t, q, "a1-resend.json", a1)
	putMessage(t, q, "a2.json", `{"msg_id":"a2","order_no":"A","seq":2,"amount":0.10}`)
	putMessage(t, q, "a3.json", `{"msg_id":"a3","order_no":"A","seq":3,"amount":"-1.00"}`)
	r := run(t, "consume", q, "--db", dsn, "--sql", sqlFile, "--sql-timeout", "5s")
	if r.code != 2 || !strings.Contains(r.stderr, "--sql-timeout: ") || !strings.Contains(r.stderr, "MariaDB") {
		t.Errorf("--sql-timeout on MariaDB: want a usage error saying why\n%s", r)
	}
	// DDL commits MariaDB's open transaction: refused before anything
	// runs, the startup check's included (the table is not created).
	ddl := writeFile(t, state, "ddl.sql", "CREATE TABLE IF NOT EXISTS made_by_check (k VARCHAR(255));\nINSERT INTO made_by_check VALUES (:msg_id);\n")
	r = run(t, "consume", q, "--db", dsn, "--sql", ddl)
	if r.code != 2 || len(notLogged(r.stderr)) != 1 || !strings.Contains(r.stderr, "statement 1 (line 1): CREATE: on a mysql ledger it commits the ledger's open transaction") {
		t.Errorf("a CREATE TABLE in --sql on MariaDB: want exit 2 and one line saying why\n%s", r)
	}
	var made int
	if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'made_by_check'`).Scan(&made); err != nil || made != 0 {
		t.Errorf("made_by_check: %d tables (%v), want none: the refused script ran", made, err)
	}
	r = mustRun(t, 0, "consume", q, "--db", dsn, "--sql", sqlFile)
	if st := parseStats(t, r); st.Processed != 2 || st.Duplicates != 1 || st.DeadLetters != 1 {
		t.Fatalf("stats %+v, want 2 processed, 1 duplicate, 1 dead letter\n%s", st, r)
	}
	var got []string
	rows, err := db.Query(`SELECT msg_id, CAST(amount AS CHAR), COALESCE(customer, '<null>'), note FROM payments ORDER BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, amount, customer, note string
		if err := rows.Scan(&id, &amount, &customer, &note); err != nil {
			t.Fatal(err)
		}
		got = append(got, id+" "+amount+" "+customer+" "+note)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a1 12.50 Zoë A/a1", "a2 0.10 <null> A/a2"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("payments %q, want %q", got, want)
	}
	var payments, last, processed int
	if err := db.QueryRow(`SELECT payments, last_seq FROM orders WHERE order_no = 'A'`).Scan(&payments, &last); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM processed`).Scan(&processed); err != nil {
		t.Fatal(err)
	}
	if payments != 2 || last != 2 || processed != 2 {
		t.Errorf("order A: %d payments, last seq %d; processed rows %d; want 2, 2, 2", payments, last, processed)
	}
	var reason, detail string
	if err := db.QueryRow(`SELECT reason, detail FROM deliveries WHERE outcome = 'dead-letter' AND file = 'a3.json'`).Scan(&reason, &detail); err != nil {
		t.Fatal(err)
	}
	if reason != "handler" || !strings.Contains(detail, "CONSTRAINT") {
		t.Errorf("dead letter of a3.json: %s %q", reason, detail)
	}
}
