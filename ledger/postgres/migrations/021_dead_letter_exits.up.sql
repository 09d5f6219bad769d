-- 021_dead_letter_exits: a dead letter whose file left error/ in a way its
-- inode does not show (docs/DESIGN.md, "fsck"). The dead-letter index
-- (ledger.DeadLetterPage, DeadLetterGroups) knows a file replayed or
-- discarded by its inode; one edited in error/ first (sed -i, an editor:
-- a new inode) and then replayed or discarded, or one removed by hand and
-- found gone by spool fsck --repair, gets a row here instead, and is no
-- longer listed. The dead-letter record itself stays: it is the history
-- spool show tells. how: 'replayed', 'discarded' (a file of its name, not
-- of its inode, was moved out of error/ after it) or 'removed' (gone, and
-- neither); by_user: who moved it, or the fsck that found it gone.
-- Same text on SQLite and PostgreSQL but for the column types.
CREATE TABLE dead_letter_exits (
    delivery_id BIGINT  NOT NULL PRIMARY KEY,
    how         TEXT    NOT NULL CHECK (how IN ('replayed', 'discarded', 'removed')),
    by_user     TEXT    NOT NULL,
    at          TEXT    NOT NULL
);
