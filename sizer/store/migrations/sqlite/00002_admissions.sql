-- The admissions document (internal/admit) when the sizer's database
-- holds it for several sizers and clusters: one row, updated under a
-- write lock (BEGIN IMMEDIATE) by every admission decision.

-- +goose Up
CREATE TABLE admissions(id INTEGER PRIMARY KEY CHECK (id = 1), doc TEXT NOT NULL, version INTEGER NOT NULL, updated INTEGER NOT NULL);

-- +goose Down
DROP TABLE admissions;
