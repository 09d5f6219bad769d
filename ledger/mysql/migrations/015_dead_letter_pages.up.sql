-- 015_dead_letter_pages: the indexes behind the HTTP API's pages of dead
-- letters; see the PostgreSQL backend's 015. MariaDB has no partial
-- indexes, and an InnoDB index ends with the primary key: (outcome) is
-- read as (outcome, id), (outcome, reason) as (outcome, reason, id).
-- reason is TEXT, so its key is a prefix. Every statement may be run
-- again (see 001).
CREATE INDEX IF NOT EXISTS deliveries_dead_letter_id ON deliveries (outcome);
CREATE INDEX IF NOT EXISTS deliveries_dead_letter_reason ON deliveries (outcome, reason(64));
CREATE INDEX IF NOT EXISTS replays_ino ON replays (ino);
