-- 047_reservation_bound: each reservation keeps its session's call bound;
-- see the other engines' 047. Every statement may be run again (see 001).
ALTER TABLE reservations ADD COLUMN IF NOT EXISTS call_bound_us BIGINT;
