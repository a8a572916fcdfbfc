package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// node_identities (schema: migrations/) holds what the sizer knows of each node identity it issued a
// credential to (see sizer/server's identity exchange).

// NodeIdentity is one instance the sizer issued a node credential to.
type NodeIdentity struct {
	InstanceID   string
	Node         string
	NonceHash    string // SHA-256 of the node's nonce, hex
	InstanceType string
	Zone         string
	Lifecycle    string    // spot or on-demand, from EC2
	Pending      time.Time // the instance's launch (identity document pendingTime)
	FirstIssued  time.Time
	LastIssued   time.Time
	Expires      time.Time
	Revoked      time.Time // zero unless revoked
	RevokeReason string
}

// NodeIdentity returns the record of an instance.
func (s *Store) NodeIdentity(ctx context.Context, instanceID string) (NodeIdentity, bool, error) {
	var ni NodeIdentity
	var pending, first, last, exp sql.NullInt64
	var rev sql.NullInt64
	var why sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT instance_id, node, nonce, instance_type, zone, lifecycle, pending, first_issued, last_issued, expires, revoked, revoke_reason
FROM node_identities WHERE instance_id = ?`, instanceID).Scan(&ni.InstanceID, &ni.Node, &ni.NonceHash, &ni.InstanceType, &ni.Zone, &ni.Lifecycle,
		&pending, &first, &last, &exp, &rev, &why)
	if errors.Is(err, sql.ErrNoRows) {
		return NodeIdentity{}, false, nil
	}
	if err != nil {
		return NodeIdentity{}, false, fmt.Errorf("reading the identity of %s: %w", instanceID, err)
	}
	ni.Pending, ni.FirstIssued, ni.LastIssued, ni.Expires, ni.Revoked = fromMS(pending), fromMS(first), fromMS(last), fromMS(exp), fromMS(rev)
	ni.RevokeReason = why.String
	return ni, true, nil
}

// ErrNonceMismatch: the instance registered before with another nonce.
var ErrNonceMismatch = errors.New("the instance registered before with another nonce")

// RecordIssue records a credential issued to ni.InstanceID: the first
// issue stores the identity and nonce; later ones must carry the same
// nonce and node (ErrNonceMismatch otherwise) and only move LastIssued and
// Expires. A revoked identity is never reissued.
func (s *Store) RecordIssue(ctx context.Context, ni NodeIdentity) error {
	err := s.tx(ctx, func(tx *Tx) error {
		var node, nonce string
		var rev sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT node, nonce, revoked FROM node_identities WHERE instance_id = ?`, ni.InstanceID).Scan(&node, &nonce, &rev)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `INSERT INTO node_identities(instance_id, node, nonce, instance_type, zone, lifecycle, pending, first_issued, last_issued, expires)
VALUES(?,?,?,?,?,?,?,?,?,?)`, ni.InstanceID, ni.Node, ni.NonceHash, ni.InstanceType, ni.Zone, ni.Lifecycle, ms(ni.Pending), ms(ni.LastIssued), ms(ni.LastIssued), ms(ni.Expires))
			return err
		case err != nil:
			return err
		case rev.Valid:
			return ErrRevoked
		case nonce != ni.NonceHash || node != ni.Node:
			return ErrNonceMismatch
		}
		_, err = tx.ExecContext(ctx, `UPDATE node_identities SET last_issued = ?, expires = ? WHERE instance_id = ?`, ms(ni.LastIssued), ms(ni.Expires), ni.InstanceID)
		return err
	})
	if err != nil && !errors.Is(err, ErrNonceMismatch) && !errors.Is(err, ErrRevoked) {
		return fmt.Errorf("recording the credential of %s: %w", ni.InstanceID, err)
	}
	return err
}

// ErrRevoked: the identity was revoked (its instance ended).
var ErrRevoked = errors.New("the instance's node identity was revoked")

// Revoke marks an instance's identity dead (EC2 says it no longer runs);
// every credential of it is refused from now on. Unknown instances are not
// an error.
func (s *Store) Revoke(ctx context.Context, instanceID, reason string, at time.Time) error {
	return s.tx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE node_identities SET revoked = coalesce(revoked, ?), revoke_reason = coalesce(revoke_reason, ?) WHERE instance_id = ?`, ms(at), reason, instanceID)
		return err
	})
}

// InstanceEnd says whether the sizer knows the instance ended: its
// termination was recorded (burst-suspend, the reconciler) or its identity
// revoked.
func (s *Store) InstanceEnd(ctx context.Context, instanceID string) (ended bool, why string, err error) {
	var term sql.NullInt64
	err = s.r.QueryRowContext(ctx, `SELECT terminated FROM instances WHERE instance_id = ?`, instanceID).Scan(&term)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, "", fmt.Errorf("reading the end of %s: %w", instanceID, err)
	}
	if term.Valid {
		return true, "terminated at " + fromMS(term).Format(time.RFC3339), nil
	}
	var rev sql.NullInt64
	var reason sql.NullString
	err = s.r.QueryRowContext(ctx, `SELECT revoked, revoke_reason FROM node_identities WHERE instance_id = ?`, instanceID).Scan(&rev, &reason)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, "", fmt.Errorf("reading the end of %s: %w", instanceID, err)
	}
	if rev.Valid {
		return true, "revoked: " + reason.String, nil
	}
	return false, "", nil
}

// LaunchRecord is what burst-resume told the sizer about an instance.
type LaunchRecord struct {
	InstanceID, Node, InstanceType, Zone, Capacity, JobID string
	Launched, Terminated                                  time.Time
}

// Launch returns the launch record of an instance.
func (s *Store) Launch(ctx context.Context, instanceID string) (LaunchRecord, bool, error) {
	var l LaunchRecord
	var node, typ, zone, capa, job sql.NullString
	var launched, term sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT instance_id, node, instance_type, zone, capacity, job_id, launched, terminated FROM instances WHERE instance_id = ?`, instanceID).
		Scan(&l.InstanceID, &node, &typ, &zone, &capa, &job, &launched, &term)
	if errors.Is(err, sql.ErrNoRows) {
		return LaunchRecord{}, false, nil
	}
	if err != nil {
		return LaunchRecord{}, false, fmt.Errorf("reading the launch of %s: %w", instanceID, err)
	}
	l.Node, l.InstanceType, l.Zone, l.Capacity, l.JobID = node.String, typ.String, zone.String, capa.String, job.String
	l.Launched, l.Terminated = fromMS(launched), fromMS(term)
	return l, true, nil
}

// HasInterruption says whether an interruption of the instance is stored.
func (s *Store) HasInterruption(ctx context.Context, instanceID string) (bool, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM interruptions WHERE instance_id = ?`, instanceID).Scan(&n); err != nil {
		return false, fmt.Errorf("reading interruptions of %s: %w", instanceID, err)
	}
	return n > 0, nil
}

// tablesQuery lists the store's tables by name.
func (s *Store) tablesQuery() string {
	if s.driver == DriverPostgres {
		return `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`
	}
	return `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
}

// Dump returns every row of every table as text, table by table, rows in
// primary-key order: the e2e security test compares it before and after
// each attack.
func (s *Store) Dump(ctx context.Context) (map[string][]string, error) {
	rows, err := s.r.QueryContext(ctx, s.tablesQuery())
	if err != nil {
		return nil, fmt.Errorf("listing tables: %w", err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string][]string{}
	for _, t := range tables {
		rs, err := s.r.QueryContext(ctx, `SELECT * FROM "`+t+`" ORDER BY 1, 2`)
		if err != nil {
			return nil, fmt.Errorf("dumping %s: %w", t, err)
		}
		cols, _ := rs.Columns()
		out[t] = []string{}
		for rs.Next() {
			vals, err := scanAny(rs, len(cols))
			if err != nil {
				rs.Close()
				return nil, err
			}
			line := ""
			for i, v := range vals {
				if i > 0 {
					line += " | "
				}
				switch x := v.(type) {
				case nil:
					line += "NULL"
				case []byte:
					line += string(x)
				case int64:
					line += strconv.FormatInt(x, 10)
				case float64:
					line += strconv.FormatFloat(x, 'g', -1, 64)
				default:
					line += fmt.Sprint(x)
				}
			}
			out[t] = append(out[t], line)
		}
		rs.Close()
	}
	return out, nil
}
