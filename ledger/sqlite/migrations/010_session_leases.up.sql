-- 010_session_leases: the liveness of consumer sessions judged by a shared
-- database's clock (PostgreSQL, MariaDB: see their 010). An SQLite ledger
-- is one host's, whose sessions are judged by their directory's lock, so
-- the table stays empty here; it exists so that every engine has one
-- schema.
CREATE TABLE session_leases (
    session TEXT    NOT NULL PRIMARY KEY,
    expires TEXT    NOT NULL,
    taken   INTEGER NOT NULL DEFAULT 0
);
