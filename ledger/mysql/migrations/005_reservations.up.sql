-- 005_reservations: the msg_ids whose external call is in flight; see the
-- other engines' 005. Every statement may be run again (see 001).

CREATE TABLE IF NOT EXISTS reservations (
    msg_id VARBINARY(1024) NOT NULL PRIMARY KEY,
    claim  VARBINARY(1024) NOT NULL,
    owner  VARBINARY(255)  NOT NULL,
    at     VARCHAR(32)     NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX IF NOT EXISTS reservations_owner ON reservations (owner);
