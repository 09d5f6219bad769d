-- 002_work: business work in the ledger transaction (retries, rich dead
-- letters, conflicting redeliveries). Same text on SQLite and PostgreSQL.

-- attempts holds the messages waiting for a retry after a transient handler
-- failure: the count and the next time live here, not in a consumer's
-- memory, so a restart keeps them. A row is removed when the message
-- succeeds or is dead-lettered.
CREATE TABLE attempts (
    msg_id        TEXT    NOT NULL PRIMARY KEY,
    attempts      INTEGER NOT NULL,
    first_failure TEXT    NOT NULL,
    last_failure  TEXT    NOT NULL,
    next_at       TEXT    NOT NULL,
    last_error    TEXT    NOT NULL,
    file          TEXT    NOT NULL
);

-- A dead letter of the handler keeps its attempt history.
ALTER TABLE deliveries ADD COLUMN attempts INTEGER;
ALTER TABLE deliveries ADD COLUMN first_failure TEXT;
ALTER TABLE deliveries ADD COLUMN last_failure TEXT;
-- 1 for a duplicate whose content differs from the processed row's: the
-- same msg_id with another body is a producer bug or tampering.
ALTER TABLE deliveries ADD COLUMN conflict INTEGER NOT NULL DEFAULT 0;
CREATE INDEX deliveries_conflict ON deliveries (msg_id) WHERE conflict = 1;
