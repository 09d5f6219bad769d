-- The ledger's tables on MariaDB. MariaDB commits every DDL statement by
-- itself, so a migration is not one transaction here: each statement is
-- written to be run again (IF NOT EXISTS, OR REPLACE), and a migration cut
-- short is completed by the next open.
--
-- Identities and payloads (msg_id, claim, order_no, amount, content_hash,
-- payload) are binary strings: compared and sorted byte for byte, as on
-- the other engines, whatever the server's collation (a _ci collation
-- would make "A" and "a" one msg_id, a PAD SPACE one "a" and "a "). A key
-- is at most 1024 bytes (InnoDB keys are at most 3072); the dialect
-- dead-letters a longer msg_id. Descriptive text is utf8mb4 with a binary
-- collation. Timestamps are text in ledger.TimeLayout, as everywhere.

CREATE TABLE IF NOT EXISTS processed (
    msg_id       VARBINARY(1024) NOT NULL PRIMARY KEY,
    order_no     BLOB,
    seq          BIGINT,
    amount       BLOB,
    processed_at VARCHAR(32)     NOT NULL,
    file         TEXT            NOT NULL,
    content_hash VARBINARY(255)  NOT NULL,
    payload      LONGBLOB        NOT NULL,
    claim        VARBINARY(1024) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS deliveries (
    id           BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
    claim        VARBINARY(1024) NOT NULL UNIQUE,
    file         TEXT            NOT NULL,
    ino          BIGINT,
    consumer     TEXT            NOT NULL,
    msg_id       VARBINARY(1024),
    outcome      VARCHAR(32)     NOT NULL
                 CHECK (outcome IN ('processed', 'duplicate', 'dead-letter')),
    reason       TEXT,
    field        TEXT,
    detail       TEXT,
    content_hash VARBINARY(255),
    size         BIGINT,
    at           VARCHAR(32)     NOT NULL,
    CHECK (outcome = 'dead-letter' OR msg_id IS NOT NULL),
    CHECK (outcome <> 'dead-letter' OR reason IS NOT NULL)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- MariaDB has no partial indexes: the other engines' WHERE outcome = ...
-- are whole-column indexes here.
CREATE INDEX IF NOT EXISTS deliveries_duplicate_msg_id ON deliveries (msg_id);
CREATE INDEX IF NOT EXISTS deliveries_dead_letter_ino ON deliveries (ino);

CREATE TABLE IF NOT EXISTS replays (
    id       BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    file     TEXT        NOT NULL,
    new_name TEXT        NOT NULL,
    ino      BIGINT,
    by_user  TEXT        NOT NULL,
    note     TEXT,
    at       VARCHAR(32) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE OR REPLACE VIEW duplicates AS
    SELECT id, msg_id, file, ino, consumer, claim, content_hash, size, at
    FROM deliveries
    WHERE outcome = 'duplicate';

CREATE OR REPLACE VIEW dead_letters AS
    SELECT id, file, ino, reason, field, detail, consumer, claim, content_hash, size, at
    FROM deliveries
    WHERE outcome = 'dead-letter';
