-- 021_dead_letter_exits: a dead letter whose file left error/ in a way its
-- inode does not show; see the other engines' 021. Every statement may be
-- run again (see 001).
CREATE TABLE IF NOT EXISTS dead_letter_exits (
    delivery_id BIGINT      NOT NULL PRIMARY KEY,
    how         VARCHAR(16) NOT NULL CHECK (how IN ('replayed', 'discarded', 'removed')),
    by_user     TEXT        NOT NULL,
    at          VARCHAR(32) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
