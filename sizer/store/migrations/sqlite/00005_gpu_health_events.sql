-- The GPU health events agents report (issue 28): one row per event, with
-- the instance's type and zone from its launch record (or identity
-- exchange) so per-type failure rates can be read.

-- +goose Up
CREATE TABLE IF NOT EXISTS gpu_health_events(instance_id TEXT NOT NULL, node TEXT NOT NULL, instance_type TEXT, zone TEXT, ts INTEGER NOT NULL,
  gpu INTEGER NOT NULL, uuid TEXT, bus_id TEXT, kind TEXT NOT NULL, xid INTEGER NOT NULL DEFAULT 0, count INTEGER NOT NULL DEFAULT 0, detail TEXT,
  action TEXT NOT NULL, reason TEXT, jobs TEXT, gate INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(instance_id, ts, gpu, kind, xid));
CREATE INDEX IF NOT EXISTS gpu_health_events_ts ON gpu_health_events(ts);

-- +goose Down
DROP TABLE gpu_health_events;
