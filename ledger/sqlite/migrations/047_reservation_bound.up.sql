-- 047_reservation_bound: each reservation keeps its session's call bound,
-- the longest one of its calls may run (microseconds), so that a consumer
-- that finds the session dead holds its msg_ids for the dead session's
-- bound, not its own: one restarted with a shorter timeout must not call a
-- msg_id whose first call may still run. NULL in the rows of an older
-- spool, which the recovering consumer's own bound stands in for. Keep in
-- step with the other engines' 047.
ALTER TABLE reservations ADD COLUMN call_bound_us INTEGER;
