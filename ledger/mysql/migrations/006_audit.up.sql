-- 006_audit: spool_audit, prefixed because a --sql handler's business
-- tables share this database and "audit" is a name they use. Every
-- operator action that changes the queue or the ledger,
-- and every refusal of one; see the other engines' 006. Every statement may
-- be run again (see 001).

CREATE TABLE IF NOT EXISTS spool_audit (
    id        BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at        VARCHAR(32) NOT NULL,
    actor     TEXT        NOT NULL,
    role      VARCHAR(64) NOT NULL DEFAULT '',
    via       VARCHAR(32) NOT NULL,
    action    VARCHAR(64) NOT NULL,
    selection LONGTEXT    NOT NULL,
    counts    TEXT        NOT NULL,
    outcome   VARCHAR(32) NOT NULL,
    detail    TEXT        NOT NULL,
    ended_at  VARCHAR(32),
    host      VARCHAR(255) NOT NULL DEFAULT '',
    pid       BIGINT      NOT NULL DEFAULT 0,
    task_id   BIGINT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX IF NOT EXISTS spool_audit_at ON spool_audit (at);
CREATE INDEX IF NOT EXISTS spool_audit_outcome ON spool_audit (outcome);
CREATE INDEX IF NOT EXISTS spool_audit_task ON spool_audit (task_id);
