-- Who leads the sizers on this database (PostgreSQL only elects; on SQLite
-- the one sizer leads and the row just records it): the holder and its
-- epoch, one more at every election.

-- +goose Up
CREATE TABLE leadership(id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER NOT NULL, holder TEXT NOT NULL, since INTEGER NOT NULL);

-- +goose Down
DROP TABLE leadership;
