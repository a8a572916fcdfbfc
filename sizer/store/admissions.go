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

// AdmissionsVersion returns the admissions document and its version (0:
// none written yet).
func (s *Store) AdmissionsVersion(ctx context.Context) ([]byte, int64, error) {
	var doc string
	var v int64
	err := s.r.QueryRowContext(ctx, `SELECT doc, version FROM admissions WHERE id = 1`).Scan(&doc, &v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading the admissions: %w", err)
	}
	return []byte(doc), v, nil
}

// SwapAdmissions stores doc as the admissions document if its version is
// still expect, and returns the new version; ok is false (and nothing
// changes) when another writer came first. One UPDATE guarded by the
// version: atomic on both drivers, from any number of sizers.
func (s *Store) SwapAdmissions(ctx context.Context, expect int64, doc []byte) (version int64, ok bool, err error) {
	err = s.tx(ctx, func(tx *Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO admissions(id, doc, version, updated) VALUES(1, '', 0, ?) ON CONFLICT(id) DO NOTHING`, ms(time.Now())); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE admissions SET doc = ?, version = version + 1, updated = ? WHERE id = 1 AND version = ?`, string(doc), ms(time.Now()), expect)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		ok, version = n == 1, expect+1
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("storing the admissions: %w", err)
	}
	return version, ok, nil
}
