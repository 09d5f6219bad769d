-- 010_session_leases: the liveness of each consumer session, judged by the
-- server's clock; see the PostgreSQL backend's 010. Every statement may be
-- run again (see 001).

CREATE TABLE IF NOT EXISTS session_leases (
    session VARBINARY(255) NOT NULL PRIMARY KEY,
    expires DATETIME(6)    NOT NULL,
    taken   INTEGER        NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
