-- 047_reservation_bound: each reservation keeps its session's call bound;
-- see the SQLite engine's 047.
ALTER TABLE reservations ADD COLUMN call_bound_us BIGINT;
