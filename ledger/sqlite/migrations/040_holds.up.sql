-- 040_holds: an operator's pause of the queue and holds of messages
-- (docs/DESIGN.md, "Pause and hold"), in the ledger so that every
-- consumer of the queue, on every host, sees them.
--
-- spool_pause is one row (id 1), always there: paused 1 while the queue
-- is paused, with who paused it (by_user, an audit actor such as
-- os:alice; by_role, via), why (note) and when (at). version grows at
-- every change of the pause or of spool_held_ids, so that a consumer's
-- poll of an unchanged ledger reads this one row.
CREATE TABLE spool_pause (
    id      INTEGER PRIMARY KEY,
    paused  INTEGER NOT NULL DEFAULT 0,
    version INTEGER NOT NULL DEFAULT 0,
    by_user TEXT    NOT NULL DEFAULT '',
    by_role TEXT    NOT NULL DEFAULT '',
    via     TEXT    NOT NULL DEFAULT '',
    note    TEXT    NOT NULL DEFAULT '',
    at      TEXT    NOT NULL DEFAULT ''
);
INSERT INTO spool_pause (id) VALUES (1);

-- spool_held_ids: the msg_ids held. A consumer moves a delivery of one
-- into held/ instead of processing it, until it is released.
CREATE TABLE spool_held_ids (
    msg_id  TEXT NOT NULL PRIMARY KEY,
    by_user TEXT NOT NULL,
    by_role TEXT NOT NULL DEFAULT '',
    via     TEXT NOT NULL,
    note    TEXT NOT NULL DEFAULT '',
    at      TEXT NOT NULL
);

-- spool_held_files: the files in held/, each with its name there (file)
-- and inode, the name it had in inbox/ (origin), its msg_id when known,
-- why it is there (cause: 'file' for spool hold FILE, 'msg_id' when a
-- consumer set it aside for its held msg_id), and who held it, when and
-- why. A row is written after its file's move into held/ and deleted
-- before its move out, so a row always names a file in held/ (a file may
-- lack one: a hold killed between the two).
CREATE TABLE spool_held_files (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    file    TEXT    NOT NULL,
    ino     INTEGER,
    origin  TEXT    NOT NULL,
    msg_id  TEXT,
    cause   TEXT    NOT NULL,
    by_user TEXT    NOT NULL,
    by_role TEXT    NOT NULL DEFAULT '',
    via     TEXT    NOT NULL,
    note    TEXT    NOT NULL DEFAULT '',
    at      TEXT    NOT NULL
);
CREATE INDEX spool_held_files_msg_id ON spool_held_files (msg_id);
