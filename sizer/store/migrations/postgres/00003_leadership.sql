-- Who leads the sizers on this database (elected by an advisory lock held
-- on one dedicated session): the holder and its epoch, one more at every
-- election.

-- +goose Up
CREATE TABLE leadership(id BIGINT PRIMARY KEY CHECK (id = 1), epoch BIGINT NOT NULL, holder TEXT NOT NULL, since BIGINT NOT NULL);

-- +goose Down
DROP TABLE leadership;
