-- 003_claims: a processed delivery is recorded by its processed row alone;
-- see the other engines' 003. Every statement may be run again (see 001).

ALTER TABLE processed ADD COLUMN IF NOT EXISTS ino BIGINT;

CREATE OR REPLACE VIEW claims AS
    SELECT claim, file, ino, msg_id, 'processed' AS outcome, NULL AS reason, NULL AS field,
           NULL AS detail, content_hash, processed_at AS at
    FROM processed
    UNION ALL
    SELECT claim, file, ino, msg_id, outcome, reason, field, detail, content_hash, at
    FROM deliveries
    WHERE outcome <> 'processed';
