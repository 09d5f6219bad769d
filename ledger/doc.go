// Package ledger is spool's idempotent record of deliveries: portable SQL over
// database/sql that runs unchanged on SQLite (the embedded default) and
// PostgreSQL (scale-out).
//
// The engines differ only behind a Dialect: its name, its placeholder style
// and its migrations. Every shared query is written once, with ? placeholders,
// in the subset of SQL both engines speak (INSERT ... ON CONFLICT DO NOTHING,
// window functions, CAST(... AS TEXT), ||). Backends live in sibling packages
// (ledger/sqlite) that open a *sql.DB with the right settings and hand it to
// New; each passes the conformance suite in ledger/ledgertest.
//
// The schema (see migrations/) has three tables and two views:
//
//	processed     one row per distinct valid msg_id (I2); its PRIMARY KEY
//	              absorbs duplicates
//	deliveries    one row per claim: processed, duplicate or dead-letter,
//	              with reason and detail for a dead letter (I4)
//	replays       every file moved from error/ back to inbox/
//	duplicates    view: the duplicate deliveries
//	dead_letters  view: the dead-letter deliveries
//
// Timestamps are stored as TEXT in TimeLayout, so they sort as text and read
// the same on both engines; money is TEXT, exactly as sent.
package ledger
