-- 008_outbox: the transactional outbox and the relays' leases; see the
-- other engines' 008. Every statement may be run again (see 001). MariaDB
-- has no partial indexes: the pending index covers every row.

CREATE TABLE IF NOT EXISTS outbox (
    id           BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
    aggregate    VARBINARY(1024) NOT NULL,
    type         TEXT            NOT NULL,
    payload      LONGBLOB        NOT NULL,
    headers      TEXT,
    msg_id       VARBINARY(1024),
    created_at   VARCHAR(32)     NOT NULL DEFAULT (DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ')),
    published_at VARCHAR(32),
    target       TEXT,
    attempts     INT             NOT NULL DEFAULT 0,
    next_at      VARCHAR(32),
    last_error   TEXT,
    parked_at    VARCHAR(32),
    park_reason  TEXT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (published_at, aggregate, id);
CREATE INDEX IF NOT EXISTS outbox_aggregate ON outbox (aggregate, id);

CREATE TABLE IF NOT EXISTS outbox_leases (
    aggregate VARBINARY(1024) NOT NULL PRIMARY KEY,
    owner     VARBINARY(255)  NOT NULL,
    expires   VARCHAR(32)     NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
