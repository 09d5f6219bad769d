-- 002_work: business work in the ledger transaction (retries, rich dead
-- letters, conflicting redeliveries); see the other engines' 002 for what
-- each column is. Every statement may be run again (see 001).

CREATE TABLE IF NOT EXISTS attempts (
    msg_id        VARBINARY(1024) NOT NULL PRIMARY KEY,
    attempts      INTEGER         NOT NULL,
    first_failure VARCHAR(32)     NOT NULL,
    last_failure  VARCHAR(32)     NOT NULL,
    next_at       VARCHAR(32)     NOT NULL,
    last_error    TEXT            NOT NULL,
    file          TEXT            NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS attempts INTEGER;
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS first_failure VARCHAR(32);
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS last_failure VARCHAR(32);
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS conflict INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS deliveries_conflict ON deliveries (conflict, msg_id);
