-- 032_approval_policy: the queue's approval policy is the ledger's; see
-- the other engines' 032. Every statement may be run again (see 001).
CREATE TABLE IF NOT EXISTS spool_approval_policy (
    id           INTEGER      NOT NULL PRIMARY KEY,
    replay_over  BIGINT       NOT NULL,
    discard_over BIGINT       NOT NULL,
    set_by       TEXT         NOT NULL,
    set_at       VARCHAR(32)  NOT NULL,
    source       VARCHAR(32)  NOT NULL DEFAULT ''
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE spool_tasks ADD COLUMN IF NOT EXISTS by_os VARCHAR(255) NOT NULL DEFAULT '';
