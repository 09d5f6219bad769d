-- 004_integrity: the ledger knows its queue, replays are intents first, and
-- rows rebuilt by fsck --repair say so; see the other engines' 004. Every
-- statement may be run again (see 001).

CREATE TABLE IF NOT EXISTS meta (
    name  VARBINARY(255) NOT NULL PRIMARY KEY,
    value BLOB           NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS replay_intents (
    id          BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    by_user     TEXT        NOT NULL,
    note        TEXT,
    created_at  VARCHAR(32) NOT NULL,
    state       VARCHAR(16) NOT NULL CHECK (state IN ('pending', 'staged', 'done')),
    finished_at VARCHAR(32)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS replay_items (
    intent_id BIGINT NOT NULL,
    idx       BIGINT NOT NULL,
    file      TEXT   NOT NULL,
    ino       BIGINT,
    PRIMARY KEY (intent_id, idx),
    FOREIGN KEY (intent_id) REFERENCES replay_intents (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE replays ADD COLUMN IF NOT EXISTS intent_id BIGINT;

ALTER TABLE processed ADD COLUMN IF NOT EXISTS repaired_at VARCHAR(32);
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS repaired_at VARCHAR(32);
