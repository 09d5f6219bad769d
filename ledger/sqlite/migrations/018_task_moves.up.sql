-- 018_task_moves: the moves of a task by task_id. The transaction that
-- finishes a task's last move ends the task done only when none of its
-- replay intents or discard batches is left unfinished (ledger/taskmove.go,
-- endTask); without these indexes that check reads both tables whole, and
-- both grow by a row per move for as long as the history is kept.
CREATE INDEX replay_intents_task ON replay_intents (task_id);
CREATE INDEX discard_batches_task ON discard_batches (task_id);
