package ledger

// queries are the shared SQL statements, written once with ? placeholders in
// the subset of SQL that every engine speaks (the conflict clauses of
// inserts completed by the dialect), and rebound for the dialect when a DB
// is made.
type queries struct {
	insertProcessed string
	selectAttempts  string
	upsertAttempts  string
	deleteAttempts  string
	retrySchedule   string
	claimOutcome    string
	claimReject     string
	processedClaim  string
	duplicates      string
	countProcessed  string
	countDeliveries string
	insertReplay    string
	processed       string
}

func newQueries(d Dialect) queries {
	return queries{
		// One row, for the path with business work; RowsAffected tells an
		// insert (1) from a duplicate (0) on every engine.
		insertProcessed: d.Rebind(d.InsertNew(`INSERT INTO processed
    (msg_id, order_no, seq, amount, processed_at, file, content_hash, payload, claim, ino, schema_version, traceparent, tenant)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, "msg_id", "")),
		selectAttempts: d.Rebind(`SELECT attempts, first_failure FROM attempts WHERE msg_id = ?`),
		upsertAttempts: d.Rebind(d.InsertOrUpdate(`INSERT INTO attempts (msg_id, attempts, first_failure, last_failure, next_at, last_error, file)
VALUES (?, ?, ?, ?, ?, ?, ?)`, "msg_id", []string{"attempts", "last_failure", "next_at", "last_error", "file"})),
		deleteAttempts: d.Rebind(`DELETE FROM attempts WHERE msg_id = ?`),
		retrySchedule:  d.Rebind(`SELECT msg_id, next_at FROM attempts`),
		claimOutcome:   d.Rebind(`SELECT outcome FROM deliveries WHERE claim = ?`),
		claimReject: d.Rebind(`SELECT reason, field, detail, msg_id FROM deliveries
WHERE claim = ? AND outcome = 'dead-letter'`),
		processedClaim: d.Rebind(`SELECT claim FROM processed WHERE msg_id = ?`),
		// Sorted in Go, not here: collations differ between engines.
		duplicates: d.Rebind(`SELECT DISTINCT msg_id FROM deliveries
WHERE outcome = 'duplicate' AND msg_id IS NOT NULL`),
		countProcessed: d.Rebind(`SELECT COUNT(*) FROM processed`),
		countDeliveries: d.Rebind(`SELECT outcome, reason, COUNT(*) FROM deliveries
WHERE outcome <> 'processed'
GROUP BY outcome, reason`),
		insertReplay: d.Rebind(`INSERT INTO replays (file, new_name, ino, by_user, note, at)
VALUES (?, ?, ?, ?, ?, ?)`),
		processed: d.Rebind(`SELECT msg_id, order_no, seq, amount, processed_at, file, content_hash, payload, claim,
    COALESCE(schema_version, ''), COALESCE(traceparent, ''), COALESCE(tenant, '')
FROM processed
WHERE msg_id = ?`),
	}
}
