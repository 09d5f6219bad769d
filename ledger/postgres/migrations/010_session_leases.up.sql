-- 010_session_leases: the liveness of each consumer session of a ledger shared by
-- hosts, judged by the database's clock (statement_timestamp()), never by the hosts'. A
-- session inserts its row when it joins and renews expires every third of
-- its lease; a session of another host whose expires has passed is taken
-- over by the first consumer that marks its row taken, which fences it:
-- every write of the session's claims (record, reserve, settle) reads its
-- row FOR SHARE in the same transaction and commits nothing once the row
-- is taken or gone. The row is deleted when the session closes, or once
-- its directory is recovered.
CREATE TABLE session_leases (
    session TEXT        NOT NULL PRIMARY KEY,
    expires TIMESTAMPTZ NOT NULL,
    taken   INTEGER     NOT NULL DEFAULT 0
);
