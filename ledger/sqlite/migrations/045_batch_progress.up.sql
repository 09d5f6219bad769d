-- 045_batch_progress: how far consumers got in each batch file (a file
-- of many records, docs/DESIGN.md "Batch files: the consumer"). Keep in
-- step with the other engines' 045.
--
-- One row per data file, keyed by file: its name, inode, size and
-- modification time, which stay the same when a recovered claim goes
-- back to inbox/ and is claimed again (its claim identity does not).
-- batch is the claim identity of the file's first claim: each record's
-- delivery claim is batch, '#' and the record's index. position is
-- where the next record starts (batch.Position, as text), written in the
-- transaction that commits the records before it. Rows are kept after
-- the file is done, like deliveries rows.
CREATE TABLE spool_batch_progress (
    file     TEXT NOT NULL PRIMARY KEY,
    batch    TEXT NOT NULL,
    position TEXT NOT NULL,
    at       TEXT NOT NULL
);
