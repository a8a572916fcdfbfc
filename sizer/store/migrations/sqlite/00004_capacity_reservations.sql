-- The capacity reservations the ledger bills (issue 29): each as EC2
-- describes it, the on-demand rate it is billed at per reserved instance,
-- used or not, and when the ledger last saw it.

-- +goose Up
CREATE TABLE IF NOT EXISTS capacity_reservations(reservation_id TEXT PRIMARY KEY, instance_type TEXT NOT NULL, zone TEXT NOT NULL, count INTEGER NOT NULL,
  price REAL NOT NULL, start INTEGER NOT NULL, "end" INTEGER, state TEXT NOT NULL, match TEXT NOT NULL DEFAULT '', seen INTEGER NOT NULL);

-- +goose Down
DROP TABLE capacity_reservations;
