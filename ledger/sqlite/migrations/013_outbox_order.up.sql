-- 013_outbox_order: an aggregate's outbox rows commit in the order of
-- their ids (see PostgreSQL's 013, where a trigger locks the aggregate's
-- row here before the insert takes its id). SQLite has one writer at a
-- time: a transaction takes its ids and commits before the next one
-- writes, so the table stays empty here; it exists so that every engine
-- has one schema.
CREATE TABLE outbox_order (
    aggregate TEXT    NOT NULL PRIMARY KEY,
    n         INTEGER NOT NULL DEFAULT 0
);
