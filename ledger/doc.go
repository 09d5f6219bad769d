// Package ledger is spool's idempotent record of deliveries: portable SQL over
// database/sql that runs unchanged on SQLite (the embedded default) and
// PostgreSQL (scale-out).
//
// The engines differ only behind a Dialect, an interface each backend
// package implements: its placeholders, its migrations and their lock,
// which errors are conflicts worth retrying, and the capabilities that
// differ (one writer at a time or many, the conflict clause of an insert, a
// statement timeout, the longest key). Nothing in this package names an
// engine. Backends register themselves by DSN scheme (Register, Open).
// Every shared query is written once, with ? placeholders, in the subset of
// SQL every engine speaks (window functions, CAST(... AS VARCHAR(n)), ||).
// Backends live in sibling packages (ledger/sqlite, ledger/postgres) that
// open a *sql.DB with the right settings and hand it to New with their
// Dialect; each passes the conformance suite in ledger/ledgertest.
//
// The schema (see each backend's migrations/; docs/DESIGN.md, "The ledger", has every
// column):
//
//	processed     one row per distinct valid msg_id (I2); its PRIMARY KEY
//	              absorbs duplicates; it also records the claim that
//	              processed it
//	deliveries    one row per other claim: duplicate or dead-letter, with
//	              reason and detail for a dead letter (I4); ledgers older
//	              than migration 003 also hold processed claims here
//	attempts      messages waiting for a retry of their handler
//	replays       every file moved from error/ back to inbox/
//	replay_intents, replay_items
//	              a replay as committed before its first move (package
//	              replay), and the files it selected
//	meta          facts about the ledger: queue_id binds it to its queue
//	              (Bind), new_ledger_at marks one started empty on purpose
//	schema_migrations
//	              the migrations applied
//	claims        view: every recorded claim, whatever its outcome
//	duplicates    view: the duplicate deliveries
//	dead_letters  view: the dead-letter deliveries
//
// DB's own methods are what opens and describes a ledger. The rest is in
// stores, each a small value type named by what it holds and reached by
// an accessor of DB: Consumer (the root package's spool.Ledger, which
// spool.NewConsumer is given), Audit (AuditLog), Outbox, Tasks, Replays
// (ReplayLog), Discards (DiscardLog), DeadLetters, Holding, Messages,
// Fsck and Backup, as in db.Audit().Begin(ctx, e).
//
// Timestamps are stored as TEXT in TimeLayout, so they sort as text and read
// the same on every engine; money is TEXT, exactly as sent.
package ledger
