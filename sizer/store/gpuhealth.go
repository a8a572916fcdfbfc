package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// (its table: migrations/*/00005_gpu_health_events.sql)

// addGPUHealth stores one health record of batch b.
func addGPUHealth(ctx context.Context, tx *Tx, b sizerapi.ReportBatch, r sizerapi.Record) error {
	h := r.Health
	if h == nil {
		return errors.New("gpu_health record without health")
	}
	var typ, zone sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT instance_type, zone FROM instances WHERE instance_id = ?1
UNION ALL SELECT instance_type, zone FROM node_identities WHERE instance_id = ?1 LIMIT 1`, b.InstanceID).Scan(&typ, &zone)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	t := h.Time
	if t.IsZero() {
		t = r.Time
	}
	jobs, _ := json.Marshal(h.Jobs)
	_, err = tx.ExecContext(ctx, `INSERT OR IGNORE INTO gpu_health_events(instance_id, node, instance_type, zone, ts, gpu, uuid, bus_id, kind, xid, count, detail, action, reason, jobs, gate)
VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, b.InstanceID, b.Node, typ.String, zone.String, ms(t), h.GPU, h.UUID, h.BusID, h.Kind, int64(h.Xid), int64(h.Count),
		h.Detail, h.Action, h.Reason, string(jobs), h.Gate)
	return err
}

// GPUHealthEvents returns the GPU health events at or after since, newest
// first, at most limit (0: 100).
func (s *Store) GPUHealthEvents(ctx context.Context, since time.Time, limit int) ([]sizerapi.GPUHealthRow, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, `SELECT instance_id, node, coalesce(instance_type,''), coalesce(zone,''), ts, gpu, coalesce(uuid,''), coalesce(bus_id,''), kind, xid, count,
coalesce(detail,''), action, coalesce(reason,''), coalesce(jobs,''), gate FROM gpu_health_events WHERE ts >= ? ORDER BY ts DESC LIMIT ?`, ms(since), limit)
	if err != nil {
		return nil, fmt.Errorf("reading GPU health events: %w", err)
	}
	defer rows.Close()
	var out []sizerapi.GPUHealthRow
	for rows.Next() {
		var row sizerapi.GPUHealthRow
		var ts, xid, count int64
		var jobs string
		h := &row.Event
		if err := rows.Scan(&row.InstanceID, &row.Node, &row.InstanceType, &row.Zone, &ts, &h.GPU, &h.UUID, &h.BusID, &h.Kind, &xid, &count,
			&h.Detail, &h.Action, &h.Reason, &jobs, &h.Gate); err != nil {
			return nil, fmt.Errorf("reading GPU health events: %w", err)
		}
		h.Time, h.Xid, h.Count = time.UnixMilli(ts).UTC(), uint64(xid), uint64(count)
		if jobs != "" && jobs != "null" {
			json.Unmarshal([]byte(jobs), &h.Jobs)
		}
		out = append(out, row)
	}
	return out, rows.Err()
}
