-- The admissions document (internal/admit) shared by every sizer and
-- cluster on this database: one row, locked (SELECT ... FOR UPDATE) by
-- every admission decision.

-- +goose Up
CREATE TABLE admissions(id BIGINT PRIMARY KEY CHECK (id = 1), doc TEXT NOT NULL, version BIGINT NOT NULL, updated BIGINT NOT NULL);

-- +goose Down
DROP TABLE admissions;
