-- 007_discards: dead letters an operator removed from error/ on purpose;
-- see the other engines' 007. Every statement may be run again (see 001).

CREATE TABLE IF NOT EXISTS discard_batches (
    id          BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    by_user     TEXT        NOT NULL,
    note        TEXT        NOT NULL,
    created_at  VARCHAR(32) NOT NULL,
    state       VARCHAR(16) NOT NULL CHECK (state IN ('pending', 'staged', 'done')),
    to_dir      TEXT,
    finished_at VARCHAR(32)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS discards (
    batch_id     BIGINT          NOT NULL,
    idx          BIGINT          NOT NULL,
    file         TEXT            NOT NULL,
    ino          BIGINT,
    msg_id       VARBINARY(1024),
    reason       TEXT            NOT NULL,
    content_hash VARCHAR(64),
    size         BIGINT          NOT NULL,
    outcome      VARCHAR(16)     CHECK (outcome IN ('deleted', 'moved', 'missing')),
    new_name     TEXT,
    PRIMARY KEY (batch_id, idx),
    FOREIGN KEY (batch_id) REFERENCES discard_batches (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX IF NOT EXISTS discards_msg_id ON discards (msg_id);
CREATE INDEX IF NOT EXISTS discards_ino ON discards (ino);
