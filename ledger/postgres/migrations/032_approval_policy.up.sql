-- 032_approval_policy: the queue's approval policy is the ledger's
-- (package task, docs/DESIGN.md, "Tasks"), not a file's: a spool.conf
-- moved aside must not lift four eyes. One row (id 1) while the queue
-- has a policy, none before. replay_over and discard_over are the most
-- files a replay, a discard, may select without a second person's
-- approval, -1 for no limit. set_by is who set it (an audit actor, such
-- as os:alice), set_at when, source how ('spool.conf' when adopted from
-- the file, 'set' by spool policy set). Every change is also an audit row,
-- written in the same transaction.
CREATE TABLE spool_approval_policy (
    id           INTEGER PRIMARY KEY,
    replay_over  BIGINT  NOT NULL,
    discard_over BIGINT  NOT NULL,
    set_by       TEXT    NOT NULL,
    set_at       TEXT    NOT NULL,
    source       TEXT    NOT NULL DEFAULT ''
);

-- by_os: the OS user the requester of a task is, when known (the OS user
-- on the command line; a token's os= over HTTP), so that four eyes
-- compares persons across realms; '' when unknown.
ALTER TABLE spool_tasks ADD COLUMN by_os TEXT NOT NULL DEFAULT '';
