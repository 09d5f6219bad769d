-- 001_init: the ledger's tables on PostgreSQL (15 and later). Keep in step
-- with ../sqlite/001_init.up.sql: the shared queries in package ledger must
-- run unchanged on both.
--
-- Timestamps are TEXT in the fixed-width UTC layout
-- 2006-01-02T15:04:05.000000Z, so they compare and sort correctly as text and
-- read the same as on SQLite. Money (amount) is TEXT, stored exactly as sent.

-- processed holds one row per distinct valid msg_id (I2). Its PRIMARY KEY is
-- what absorbs duplicates: INSERT ... ON CONFLICT (msg_id) DO NOTHING.
CREATE TABLE processed (
    msg_id       TEXT   NOT NULL PRIMARY KEY,
    order_no     TEXT,
    seq          BIGINT,
    amount       TEXT,
    processed_at TEXT   NOT NULL,
    file         TEXT   NOT NULL,
    content_hash TEXT   NOT NULL,
    payload      TEXT   NOT NULL,
    claim        TEXT   NOT NULL
);


-- deliveries holds one row per claim, whatever became of it: a recovering
-- consumer asks it about a claim it finds in processing/ (I7), and a dead
-- letter's row carries its reason and detail (I4).
CREATE TABLE deliveries (
    id           BIGSERIAL PRIMARY KEY,
    claim        TEXT   NOT NULL UNIQUE,
    file         TEXT   NOT NULL,
    ino          BIGINT,
    consumer     TEXT   NOT NULL,
    msg_id       TEXT,
    outcome      TEXT   NOT NULL
                 CHECK (outcome IN ('processed', 'duplicate', 'dead-letter')),
    reason       TEXT,
    field        TEXT,
    detail       TEXT,
    content_hash TEXT,
    size         BIGINT,
    at           TEXT   NOT NULL,
    CHECK (outcome = 'dead-letter' OR msg_id IS NOT NULL),
    CHECK (outcome <> 'dead-letter' OR reason IS NOT NULL)
);

-- Partial indexes: only the rare outcomes that reports look up are indexed,
-- so the common case (a processed delivery) writes no index entry for them.
CREATE INDEX deliveries_duplicate_msg_id ON deliveries (msg_id) WHERE outcome = 'duplicate';
CREATE INDEX deliveries_dead_letter_ino ON deliveries (ino) WHERE outcome = 'dead-letter';

-- replays records every file an operator moved from error/ back to inbox/.
CREATE TABLE replays (
    id       BIGSERIAL PRIMARY KEY,
    file     TEXT   NOT NULL,
    new_name TEXT   NOT NULL,
    ino      BIGINT,
    by_user  TEXT   NOT NULL,
    note     TEXT,
    at       TEXT   NOT NULL
);

-- Views for operators: SELECT * FROM duplicates; SELECT * FROM dead_letters.
CREATE VIEW duplicates AS
    SELECT id, msg_id, file, ino, consumer, claim, content_hash, size, at
    FROM deliveries
    WHERE outcome = 'duplicate';

CREATE VIEW dead_letters AS
    SELECT id, file, ino, reason, field, detail, consumer, claim, content_hash, size, at
    FROM deliveries
    WHERE outcome = 'dead-letter';
