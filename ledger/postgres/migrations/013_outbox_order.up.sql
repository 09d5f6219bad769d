-- 013_outbox_order: an aggregate's outbox rows commit in the order of
-- their ids. A row's id is taken at its insert, but transactions commit
-- in their own order: had a transaction that took id 6 committed while
-- the one that took id 5 for the same aggregate was still open, a relay
-- would have published 6, then 5 once it committed, and the receiver
-- seen the aggregate's events out of order. (No row is ever passed over:
-- the relay reads the rows not yet published, not the ids after a
-- cursor.) docs/DESIGN.md, "The outbox".
--
-- Every insert into outbox, spool.Emit's or a --sql handler's own, first
-- locks its aggregate's row of outbox_order until its transaction ends,
-- and only then takes its id: a second transaction emitting for the
-- same aggregate waits at its insert for the first to commit or roll
-- back, so it takes a higher id and its row is never seen without the
-- first's. Other aggregates do not wait. Two transactions that emit for
-- the same aggregates in opposite orders can deadlock; the server rolls
-- one back and the ledger runs it again (a conflict, see IsConflict).
-- The function keeps the search_path of this migration, so it finds the
-- ledger's tables whatever the inserting session's search_path.
CREATE TABLE outbox_order (
    aggregate TEXT   NOT NULL PRIMARY KEY,
    n         BIGINT NOT NULL DEFAULT 0
);
-- The id is the trigger's, taken after the lock; an insert naming its id
-- keeps it.
ALTER TABLE outbox ALTER COLUMN id DROP DEFAULT;
CREATE FUNCTION outbox_order() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO outbox_order AS o (aggregate) VALUES (NEW.aggregate)
        ON CONFLICT (aggregate) DO UPDATE SET n = o.n + 1;
    IF NEW.id IS NULL THEN
        NEW.id := nextval('outbox_id_seq');
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER outbox_order BEFORE INSERT ON outbox
    FOR EACH ROW EXECUTE FUNCTION outbox_order();
