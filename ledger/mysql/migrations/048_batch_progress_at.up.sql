-- 048_batch_progress_at: spool status and the console's overview list the
-- batch files whose progress moved last (ORDER BY at DESC, file LIMIT n),
-- and spool_batch_progress keeps a row for every batch file ever consumed:
-- without an index that read sorted the whole table. Keep in step with the
-- other engines' 048. IF NOT EXISTS: MariaDB's DDL commits by itself, so a
-- migration killed after it is applied again.
CREATE INDEX IF NOT EXISTS spool_batch_progress_at ON spool_batch_progress (at, file);
