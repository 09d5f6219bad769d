-- 045_batch_progress: how far consumers got in each batch file; see the
-- other engines' 045. Every statement may be run again (see 001).

CREATE TABLE IF NOT EXISTS spool_batch_progress (
    file     VARBINARY(1024) NOT NULL PRIMARY KEY,
    batch    VARBINARY(1024) NOT NULL,
    position VARCHAR(255)    NOT NULL,
    at       VARCHAR(32)     NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
