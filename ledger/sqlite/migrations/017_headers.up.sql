-- 017_headers: the headers a processed message carried, by the contract's
-- "headers" of spool.conf (docs/DESIGN.md, "The message contract"): its
-- schema version, its W3C traceparent exactly as sent, its tenant. NULL
-- when the contract names no such field or the message lacked it. spool
-- show prints them; spool relay continues the trace of the events the
-- message's handler emitted (outbox.msg_id) and sends the tenant and
-- version with them.
ALTER TABLE processed ADD COLUMN schema_version TEXT;
ALTER TABLE processed ADD COLUMN traceparent TEXT;
ALTER TABLE processed ADD COLUMN tenant TEXT;
