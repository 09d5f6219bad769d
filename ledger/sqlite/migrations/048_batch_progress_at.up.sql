-- 048_batch_progress_at: spool status and the console's overview list the
-- batch files whose progress moved last (ORDER BY at DESC, file LIMIT n),
-- and spool_batch_progress keeps a row for every batch file ever consumed:
-- without an index that read sorted the whole table, 0.45 s for spool
-- status at 3 million rows, every 5 s while the console is watched. Keep
-- in step with the other engines' 048.
CREATE INDEX spool_batch_progress_at ON spool_batch_progress (at, file);
