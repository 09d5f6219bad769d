-- 018_task_moves: the moves of a task by task_id; see the other engines'
-- 018. Every statement may be run again (see 001).
CREATE INDEX IF NOT EXISTS replay_intents_task ON replay_intents (task_id);
CREATE INDEX IF NOT EXISTS discard_batches_task ON discard_batches (task_id);
