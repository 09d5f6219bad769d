-- 015_dead_letter_pages: the indexes behind the HTTP API's pages of dead
-- letters (spool serve --auth; ledger.DeadLetterPage, DeadLetterGroups):
-- the dead letters newest first, all or of one reason, read a page at a
-- time by keyset (id below the cursor) rather than by listing error/, and
-- the replays of an inode, by which a replayed dead letter is known to
-- have left error/. Partial, as 001's: a processed delivery, the common
-- case, writes no entry in the first two.
CREATE INDEX deliveries_dead_letter_id ON deliveries (id) WHERE outcome = 'dead-letter';
CREATE INDEX deliveries_dead_letter_reason ON deliveries (reason, id) WHERE outcome = 'dead-letter';
CREATE INDEX replays_ino ON replays (ino);
