-- 013_outbox_order: an aggregate's outbox rows commit in the order of
-- their ids; see PostgreSQL's 013. Every insert into outbox first locks
-- its aggregate's row of outbox_order until its transaction ends (the
-- trigger's upsert); InnoDB takes the AUTO_INCREMENT id after the BEFORE
-- trigger, so a second transaction emitting for the same aggregate waits
-- for the first's end and takes a higher id. Every statement may be run
-- again (see 001). A server that writes a binary log needs
-- log_bin_trust_function_creators (or SUPER) for the ledger's user to
-- create the trigger.
CREATE TABLE IF NOT EXISTS outbox_order (
    aggregate VARBINARY(1024) NOT NULL PRIMARY KEY,
    n         BIGINT          NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TRIGGER IF NOT EXISTS outbox_order BEFORE INSERT ON outbox FOR EACH ROW
    INSERT INTO outbox_order (aggregate) VALUES (NEW.aggregate) ON DUPLICATE KEY UPDATE n = n + 1;
