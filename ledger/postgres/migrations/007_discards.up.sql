-- 007_discards: dead letters an operator removed from error/ on purpose
-- (spool discard), so that fsck and show know a file was discarded, not
-- lost. A discard is committed here, with every file it selected, before
-- the first file goes, and marked done once every file is gone, so that
-- one killed half-way is finished by the next discard or fsck --repair
-- (docs/DESIGN.md, "Discard"). Same text on SQLite and PostgreSQL but for
-- the column types.

-- discard_batches: one row per spool discard run.
-- state: 'pending' (files may still be in error/ under their own names),
-- 'staged' (every selected file sits in error/ under its hidden staging
-- name, .spool-discard-<batch>-<idx>, or is already gone), 'done'.
-- to_dir: where the files were moved (--to), NULL when they were deleted.
CREATE TABLE discard_batches (
    id          BIGSERIAL PRIMARY KEY,
    by_user     TEXT    NOT NULL,
    note        TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('pending', 'staged', 'done')),
    to_dir      TEXT,
    finished_at TEXT
);

-- discards: the files of a batch, as they were in error/ when it began:
-- the exact name (the discard finds the file by it), inode, the message's
-- msg_id when known, the dead-letter reason, the SHA-256 of the body and
-- its size. outcome is set when the batch is done: 'deleted', 'moved'
-- (new_name is its name in the batch's to_dir) or 'missing' (gone from
-- error/ before the discard reached it).
CREATE TABLE discards (
    batch_id     BIGINT  NOT NULL REFERENCES discard_batches (id),
    idx          BIGINT  NOT NULL,
    file         TEXT    NOT NULL,
    ino          BIGINT,
    msg_id       TEXT,
    reason       TEXT    NOT NULL,
    content_hash TEXT,
    size         BIGINT  NOT NULL,
    outcome      TEXT    CHECK (outcome IN ('deleted', 'moved', 'missing')),
    new_name     TEXT,
    PRIMARY KEY (batch_id, idx)
);
CREATE INDEX discards_msg_id ON discards (msg_id);
CREATE INDEX discards_ino ON discards (ino);
