-- The capacity reservations the ledger bills (issue 29): each as EC2
-- describes it, the on-demand rate it is billed at per reserved instance,
-- used or not, and when the ledger last saw it.

-- +goose Up
CREATE TABLE capacity_reservations(reservation_id TEXT PRIMARY KEY, instance_type TEXT NOT NULL, zone TEXT NOT NULL, count BIGINT NOT NULL,
  price DOUBLE PRECISION NOT NULL, start BIGINT NOT NULL, "end" BIGINT, state TEXT NOT NULL, match TEXT NOT NULL DEFAULT '', seen BIGINT NOT NULL);

-- +goose Down
DROP TABLE capacity_reservations;
