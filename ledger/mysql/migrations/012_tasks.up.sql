-- 012_tasks: replays and discards as durable tasks; see the other
-- engines' 012. Every statement may be run again (see 001).

CREATE TABLE IF NOT EXISTS spool_tasks (
    id          BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind        VARCHAR(16) NOT NULL,
    state       VARCHAR(16) NOT NULL,
    request     LONGTEXT    NOT NULL,
    files       BIGINT      NOT NULL,
    skipped     BIGINT      NOT NULL DEFAULT 0,
    digest      VARCHAR(64) NOT NULL,
    by_user     TEXT        NOT NULL,
    by_role     VARCHAR(64) NOT NULL DEFAULT '',
    via         VARCHAR(32) NOT NULL,
    note        TEXT        NOT NULL,
    created_at  VARCHAR(32) NOT NULL,
    approved_by TEXT        NOT NULL,
    approved_at VARCHAR(32),
    ended_by    TEXT        NOT NULL,
    ended_at    VARCHAR(32),
    next_idx    BIGINT      NOT NULL DEFAULT 0,
    done        BIGINT      NOT NULL DEFAULT 0,
    missing     BIGINT      NOT NULL DEFAULT 0,
    changed     BIGINT      NOT NULL DEFAULT 0,
    detail      TEXT        NOT NULL,
    updated_at  VARCHAR(32) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX IF NOT EXISTS spool_tasks_state ON spool_tasks (state);

CREATE TABLE IF NOT EXISTS spool_task_files (
    task_id      BIGINT       NOT NULL,
    idx          BIGINT       NOT NULL,
    file         TEXT         NOT NULL,
    ino          BIGINT,
    content_hash VARCHAR(64)  NOT NULL DEFAULT '',
    size         BIGINT       NOT NULL DEFAULT 0,
    msg_id       TEXT         NOT NULL,
    reason       VARCHAR(64)  NOT NULL DEFAULT '',
    changed_why  VARCHAR(255) NOT NULL DEFAULT '',
    PRIMARY KEY (task_id, idx),
    FOREIGN KEY (task_id) REFERENCES spool_tasks (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE replay_intents ADD COLUMN IF NOT EXISTS task_id BIGINT;
ALTER TABLE discard_batches ADD COLUMN IF NOT EXISTS task_id BIGINT;
