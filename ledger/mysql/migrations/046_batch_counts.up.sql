-- 046_batch_counts: what became of each batch file's records, for spool
-- status; see the other engines' 046. Every statement may be run again
-- (see 001).
ALTER TABLE spool_batch_progress ADD COLUMN IF NOT EXISTS processed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spool_batch_progress ADD COLUMN IF NOT EXISTS duplicates BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spool_batch_progress ADD COLUMN IF NOT EXISTS dead_letters BIGINT NOT NULL DEFAULT 0;
