-- 046_batch_counts: what became of each batch file's records, for spool
-- status; see the SQLite engine's 046.
ALTER TABLE spool_batch_progress ADD COLUMN processed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spool_batch_progress ADD COLUMN duplicates BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spool_batch_progress ADD COLUMN dead_letters BIGINT NOT NULL DEFAULT 0;
