-- 012_tasks: replays and discards as durable tasks (package task,
-- docs/DESIGN.md, "Tasks"). A task holds what was asked (request: the
-- selection and its options as JSON), the exact file set it resolved to
-- (spool_task_files, its count and digest), who asked and why, its state
-- and its progress. It moves its files in chunks, each one replay intent
-- or discard batch of its own (task_id below), committed with the task's
-- cursor (next_idx) in one transaction, so a task killed at any instant
-- resumes exactly where it was and moves each file once.
--
-- state: 'waiting' (for approval), 'approved', 'running', 'done',
-- 'cancelled', 'failed' (checked by package ledger, not here).
-- done, missing, changed: files moved (or deleted), gone before their
-- chunk, changed since the request (not moved); updated with the
-- chunk that counts them.
CREATE TABLE spool_tasks (
    id          BIGSERIAL PRIMARY KEY,
    kind        TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    request     TEXT    NOT NULL DEFAULT '{}',
    files       INTEGER NOT NULL,
    skipped     INTEGER NOT NULL DEFAULT 0,
    digest      TEXT    NOT NULL,
    by_user     TEXT    NOT NULL,
    by_role     TEXT    NOT NULL DEFAULT '',
    via         TEXT    NOT NULL,
    note        TEXT    NOT NULL DEFAULT '',
    created_at  TEXT    NOT NULL,
    approved_by TEXT    NOT NULL DEFAULT '',
    approved_at TEXT,
    ended_by    TEXT    NOT NULL DEFAULT '',
    ended_at    TEXT,
    next_idx    INTEGER NOT NULL DEFAULT 0,
    done        INTEGER NOT NULL DEFAULT 0,
    missing     INTEGER NOT NULL DEFAULT 0,
    changed     INTEGER NOT NULL DEFAULT 0,
    detail      TEXT    NOT NULL DEFAULT '',
    updated_at  TEXT    NOT NULL
);
CREATE INDEX spool_tasks_state ON spool_tasks (state);

-- spool_task_files: a task's file set as resolved when it was asked, in
-- its order: the exact name, inode, SHA-256 of the body and size (what an
-- approval checks the queue against), msg_id and reason when known.
-- changed_why: why the file was found changed since the request when its
-- chunk came (gone from error/, another file, another body) and was not
-- moved; '' otherwise.
CREATE TABLE spool_task_files (
    task_id      BIGINT  NOT NULL REFERENCES spool_tasks (id),
    idx          INTEGER NOT NULL,
    file         TEXT    NOT NULL,
    ino          BIGINT,
    content_hash TEXT    NOT NULL DEFAULT '',
    size         BIGINT  NOT NULL DEFAULT 0,
    msg_id       TEXT    NOT NULL DEFAULT '',
    reason       TEXT    NOT NULL DEFAULT '',
    changed_why  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (task_id, idx)
);

-- The chunk of a task that an intent or batch is; NULL for the replays
-- and discards run outside a task.
ALTER TABLE replay_intents ADD COLUMN task_id BIGINT;
ALTER TABLE discard_batches ADD COLUMN task_id BIGINT;
