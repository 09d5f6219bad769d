-- 003_claims: a processed delivery is recorded by its processed row alone.
-- Same text on SQLite and PostgreSQL but for the column type.
--
-- Until 002 every delivery also had a deliveries row, processed ones
-- included. That second row, with its UNIQUE claim index, cost more than the
-- processed row itself (profiled: about a third of the ledger's time in a
-- drain), and said nothing the processed row does not: it already carries
-- the claim, the file and the content hash. From 003 on, deliveries holds
-- only the other outcomes (duplicates and dead letters), and recovery finds a
-- processed claim through its msg_id's row (SELECT claim FROM processed
-- WHERE msg_id = ?), the primary key, with no index of its own. Rows of
-- processed deliveries written before 003 stay, and mean the same.

-- The claimed file's inode, so that the processed delivery of a file in
-- done/ can be found from the file, as a deliveries row can.
ALTER TABLE processed ADD COLUMN ino INTEGER;

-- claims: every recorded claim, whatever became of it, one row each: the
-- processed rows and the other deliveries. For operators and audits.
CREATE VIEW claims AS
    SELECT claim, file, ino, msg_id, 'processed' AS outcome, NULL AS reason, NULL AS field,
           NULL AS detail, content_hash, processed_at AS at
    FROM processed
    UNION ALL
    SELECT claim, file, ino, msg_id, outcome, reason, field, detail, content_hash, at
    FROM deliveries
    WHERE outcome <> 'processed';
