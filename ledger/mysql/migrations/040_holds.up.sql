-- 040_holds: an operator's pause of the queue and holds of messages; see
-- the other engines' 040. Every statement may be run again (see 001).

CREATE TABLE IF NOT EXISTS spool_pause (
    id      INTEGER     NOT NULL PRIMARY KEY,
    paused  INTEGER     NOT NULL DEFAULT 0,
    version BIGINT      NOT NULL DEFAULT 0,
    by_user TEXT        NOT NULL DEFAULT '',
    by_role VARCHAR(64) NOT NULL DEFAULT '',
    via     VARCHAR(32) NOT NULL DEFAULT '',
    note    TEXT        NOT NULL DEFAULT '',
    at      VARCHAR(32) NOT NULL DEFAULT ''
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT IGNORE INTO spool_pause (id) VALUES (1);

CREATE TABLE IF NOT EXISTS spool_held_ids (
    msg_id  VARBINARY(1024) NOT NULL PRIMARY KEY,
    by_user TEXT            NOT NULL,
    by_role VARCHAR(64)     NOT NULL DEFAULT '',
    via     VARCHAR(32)     NOT NULL,
    note    TEXT            NOT NULL DEFAULT '',
    at      VARCHAR(32)     NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS spool_held_files (
    id      BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
    file    TEXT            NOT NULL,
    ino     BIGINT,
    origin  TEXT            NOT NULL,
    msg_id  VARBINARY(1024),
    cause   VARCHAR(16)     NOT NULL,
    by_user TEXT            NOT NULL,
    by_role VARCHAR(64)     NOT NULL DEFAULT '',
    via     VARCHAR(32)     NOT NULL,
    note    TEXT            NOT NULL DEFAULT '',
    at      VARCHAR(32)     NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX IF NOT EXISTS spool_held_files_msg_id ON spool_held_files (msg_id);
