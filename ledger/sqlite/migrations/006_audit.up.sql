-- 006_audit: spool_audit, prefixed because a --sql handler's business
-- tables share this database and "audit" is a name they use. Every
-- operator action that changes the queue or the ledger
-- (replay, discard, flush, fsck --repair, prune, a new ledger bound...), and
-- every refusal of one, with who asked, how, what and how it ended. An
-- action writes its row as 'started' before it changes anything and sets
-- its outcome after, so a row still 'started' whose process is gone is one
-- that was killed (docs/DESIGN.md, "Audit"). Rows are never deleted.
--
-- actor: the OS user, --by, or a token's name; role: empty on the command
-- line; via: 'cli', 'http'; action: 'replay', 'flush', 'repair', 'prune',
-- 'bind'...; selection and counts: JSON text (what was asked; selected,
-- done, skipped...); outcome: 'started', 'ok', 'failed', 'interrupted',
-- 'refused' (checked by package ledger, not here, so that a new one needs
-- no migration); host and pid: the process that wrote the row, which tells
-- a killed run from a running one; task_id: the durable task the row is
-- about, NULL when none.
CREATE TABLE spool_audit (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at        TEXT    NOT NULL,
    actor     TEXT    NOT NULL,
    role      TEXT    NOT NULL DEFAULT '',
    via       TEXT    NOT NULL,
    action    TEXT    NOT NULL,
    selection TEXT    NOT NULL DEFAULT '{}',
    counts    TEXT    NOT NULL DEFAULT '{}',
    outcome   TEXT    NOT NULL,
    detail    TEXT    NOT NULL DEFAULT '',
    ended_at  TEXT,
    host      TEXT    NOT NULL DEFAULT '',
    pid       INTEGER NOT NULL DEFAULT 0,
    task_id   INTEGER
);
CREATE INDEX spool_audit_at ON spool_audit (at);
CREATE INDEX spool_audit_outcome ON spool_audit (outcome);
CREATE INDEX spool_audit_task ON spool_audit (task_id);
