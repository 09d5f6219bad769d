-- order-check: the sequence problems in the ledger's processed table.
--
-- Returns the columns order_no, seq, problem, one row per problem:
--   duplicate  two or more distinct msg_ids share (order_no, seq); seq is it.
--   missing    a gap: sequences start at 1, and a run of missing seqs is one
--              row whose seq is "from-to" ("2-4"); a single one is "3".
-- No rows means every order is complete from 1 up to its highest seq. Rows
-- whose order_no or seq is NULL are ignored. Sorted by order_no, then the
-- numeric start of seq, then problem; order_no follows the database's
-- collation (byte order on SQLite and on PostgreSQL with a "C" collation).
--
-- Portable: runs unchanged on SQLite (3.25 or later, for window functions),
-- PostgreSQL and MariaDB (with sql_mode PIPES_AS_CONCAT, as the ledger's
-- sessions have), e.g. `sqlite3 DIR/ledger.db < ordercheck.sql`,
-- `psql -f ordercheck.sql` or
-- `mariadb --init-command="SET sql_mode='ANSI'" DB < ordercheck.sql`.
SELECT order_no, seq_text AS seq, problem
FROM (
    SELECT order_no,
           CAST(seq AS VARCHAR(20)) AS seq_text,
           'duplicate' AS problem,
           seq AS sort_seq
    FROM processed
    WHERE order_no IS NOT NULL AND seq IS NOT NULL
    GROUP BY order_no, seq
    HAVING COUNT(DISTINCT msg_id) > 1

    UNION ALL

    SELECT order_no,
           CASE WHEN seq - prev_seq = 2
                THEN CAST(prev_seq + 1 AS VARCHAR(20))
                ELSE CAST(prev_seq + 1 AS VARCHAR(20)) || '-' || CAST(seq - 1 AS VARCHAR(20))
           END AS seq_text,
           'missing' AS problem,
           prev_seq + 1 AS sort_seq
    FROM (
        SELECT order_no,
               seq,
               COALESCE(LAG(seq) OVER (PARTITION BY order_no ORDER BY seq), 0) AS prev_seq
        FROM (
            SELECT DISTINCT order_no, seq
            FROM processed
            WHERE order_no IS NOT NULL AND seq IS NOT NULL
        ) present
    ) steps
    WHERE seq - prev_seq > 1
) problems
ORDER BY order_no, sort_seq, problem;
