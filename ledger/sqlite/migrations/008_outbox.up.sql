-- 008_outbox: the transactional outbox. A handler inserts a row in the
-- transaction that records its message (a --sql statement, spool.Emit), so
-- that the event commits with the message's processed row or not at all;
-- spool relay delivers the rows to a target and marks them published.
-- Same text on SQLite and PostgreSQL but for id and created_at's default.
--
-- id is the event's place in the outbox, never reused (AUTOINCREMENT):
-- with the queue's identity it makes the event id the receiver dedups on.
-- created_at defaults to the insert's time in ledger.TimeLayout, so that
-- an INSERT naming only (aggregate, type, payload) is complete.
-- published_at is written after the target acknowledged the event, with
-- the target that did. attempts, next_at and last_error count the failed
-- publishes; a row that fails for good is parked (parked_at, park_reason)
-- until an operator acts on it.
CREATE TABLE outbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    aggregate    TEXT    NOT NULL,
    type         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    headers      TEXT,
    msg_id       TEXT,
    created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')),
    published_at TEXT,
    target       TEXT,
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      TEXT,
    last_error   TEXT,
    parked_at    TEXT,
    park_reason  TEXT
);
-- The relay's work: the pending rows of each aggregate in id order.
CREATE INDEX outbox_pending ON outbox (aggregate, id) WHERE published_at IS NULL;
-- prune's: the published rows by age.
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;

-- outbox_leases: which relay holds an aggregate, until when. A relay
-- publishes an aggregate's rows only while it holds the aggregate's lease,
-- so that two relays never interleave one aggregate's events; a dead
-- relay's lease runs out and another takes the aggregate over.
CREATE TABLE outbox_leases (
    aggregate TEXT NOT NULL PRIMARY KEY,
    owner     TEXT NOT NULL,
    expires   TEXT NOT NULL
);
