-- 005_reservations: a msg_id reserved for the delivery whose external call
-- (--exec, --post, a spool.Caller) is in flight, so that no two calls for
-- one msg_id run at once on any consumer of the ledger. The row is
-- committed before the call and removed by the commit of its outcome; a
-- dead owner's rows are removed by recovery once its session is gone from
-- processing/. Same text on SQLite and PostgreSQL.
CREATE TABLE reservations (
    msg_id TEXT NOT NULL PRIMARY KEY,
    claim  TEXT NOT NULL,
    owner  TEXT NOT NULL,
    at     TEXT NOT NULL
);
CREATE INDEX reservations_owner ON reservations (owner);
