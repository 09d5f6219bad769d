-- 004_integrity: the ledger knows its queue, replays are intents first, and
-- rows rebuilt by fsck --repair say so. Same text on SQLite and PostgreSQL
-- but for the column types.

-- meta holds facts about the ledger itself, one row per name. The row
-- 'queue_id' binds the ledger to the queue directory whose queue.id file
-- holds the same value: every command checks the two agree, so a ledger
-- is never silently used for another queue, and a queue whose ledger went
-- missing is never silently given an empty one (docs/DESIGN.md, "Queue
-- identity").
CREATE TABLE meta (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);

-- replay_intents: a replay is committed here, with every file it selected,
-- before the first file moves, so that one killed half-way is finished by
-- the next replay, consume or fsck --repair (docs/DESIGN.md, "Replay").
-- state: 'pending' (files may still be in error/ under their own names),
-- 'staged' (every selected file sits in error/ under its hidden staging
-- name or has already moved to inbox/), 'done'.
CREATE TABLE replay_intents (
    id          INTEGER PRIMARY KEY,
    by_user     TEXT    NOT NULL,
    note        TEXT,
    created_at  TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('pending', 'staged', 'done')),
    finished_at TEXT
);

-- replay_items: the files of an intent, by their name in error/ and inode.
-- idx names the file's staging name in error/, .spool-replay-<intent>-<idx>.
CREATE TABLE replay_items (
    intent_id INTEGER NOT NULL REFERENCES replay_intents (id),
    idx       INTEGER NOT NULL,
    file      TEXT    NOT NULL,
    ino       INTEGER,
    PRIMARY KEY (intent_id, idx)
);

-- The intent a replay belongs to; NULL for replays recorded before 004.
ALTER TABLE replays ADD COLUMN intent_id INTEGER;

-- When fsck --repair rebuilt a row from the directories; NULL for rows the
-- consumer recorded.
ALTER TABLE processed ADD COLUMN repaired_at TEXT;
ALTER TABLE deliveries ADD COLUMN repaired_at TEXT;
