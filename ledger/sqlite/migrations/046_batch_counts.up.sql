-- 046_batch_counts: what became of each batch file's records, for spool
-- status. Keep in step with the other engines' 046.
--
-- The counts are those of the records before position, written in the
-- transaction that moves position past them: the records a chunk commits
-- (RecordBatch), or the records a consumer with a Caller settled earlier
-- and the progress now passes. So a record is counted once however often
-- its consumer was killed, and a redelivered file counts its records
-- again, as duplicates.
ALTER TABLE spool_batch_progress ADD COLUMN processed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spool_batch_progress ADD COLUMN duplicates INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spool_batch_progress ADD COLUMN dead_letters INTEGER NOT NULL DEFAULT 0;
