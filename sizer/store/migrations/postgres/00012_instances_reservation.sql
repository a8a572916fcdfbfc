-- The capacity reservation (On-Demand Capacity Reservation or Capacity
-- Block, its cr- id) each instance ran in (issue 29): burst-resume sends
-- it with the launch, the ledger's sync and backfill take it from EC2's
-- CapacityReservationId; the dashboard sets each reservation's use against
-- its bill with it. '' for an instance in none (and for rows from before
-- this that EC2 no longer lists). Each reservation's type as EC2
-- describes it (ReservationType: default, capacity-block), '' for rows
-- from before this until the next sync describes them.

-- +goose Up
ALTER TABLE instances ADD COLUMN reservation_id TEXT NOT NULL DEFAULT '';
ALTER TABLE capacity_reservations ADD COLUMN reservation_type TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE capacity_reservations DROP COLUMN reservation_type;
ALTER TABLE instances DROP COLUMN reservation_id;
