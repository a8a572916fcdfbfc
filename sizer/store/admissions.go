package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// UpdateAdmissions runs f on the admissions document (internal/admit's,
// empty at first) and stores what it returns, in one transaction that
// excludes every other update, from this process or any other sizer on
// the same database: PostgreSQL locks the row (SELECT ... FOR UPDATE),
// SQLite's write transactions begin IMMEDIATE. Two resumes racing for the
// last dollars of a budget are decided one after the other.
func (s *Store) UpdateAdmissions(ctx context.Context, f func(old []byte) ([]byte, bool, error)) error {
	return s.tx(ctx, func(tx *Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO admissions(id, doc, version, updated) VALUES(1, '', 0, ?) ON CONFLICT(id) DO NOTHING`, ms(time.Now())); err != nil {
			return fmt.Errorf("creating the admissions row: %w", err)
		}
		q := `SELECT doc, version FROM admissions WHERE id = 1`
		if s.driver == DriverPostgres {
			q += ` FOR UPDATE`
		}
		var doc string
		var version int64
		if err := tx.QueryRowContext(ctx, q).Scan(&doc, &version); err != nil {
			return fmt.Errorf("locking the admissions: %w", err)
		}
		out, write, err := f([]byte(doc))
		if err != nil || !write {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE admissions SET doc = ?, version = ?, updated = ? WHERE id = 1`, string(out), version+1, ms(time.Now()))
		return err
	})
}

// ReadAdmissions returns the admissions document (empty when none).
func (s *Store) ReadAdmissions(ctx context.Context) ([]byte, error) {
	var doc string
	err := s.r.QueryRowContext(ctx, `SELECT doc FROM admissions WHERE id = 1`).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the admissions: %w", err)
	}
	return []byte(doc), nil
}
