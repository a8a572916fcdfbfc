package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// (its table: migrations/*/00004_capacity_reservations.sql)

// Reservation is a capacity reservation's ledger record.
type Reservation struct {
	ID           string
	InstanceType string
	Zone         string
	Count        int
	PriceUSD     float64 // per reserved instance-hour (the on-demand rate)
	Start        time.Time
	End          time.Time // zero while active
	State        string
	Match        string
	Seen         time.Time // the last sync that described it
	// Type is EC2's ReservationType: "default" (an On-Demand Capacity
	// Reservation) or "capacity-block"; "" when not yet described.
	Type string
}

// USD is what the reservation costs from its start to its end (or now):
// every reserved instance at PriceUSD, per second, used or not.
func (r Reservation) USD(now time.Time) (seconds int64, usd float64) {
	end := r.End
	if end.IsZero() {
		end = now
	}
	seconds = max(int64(end.Sub(r.Start)/time.Second), 0)
	return seconds, float64(seconds) * float64(r.Count) * r.PriceUSD / 3600
}

// RecordReservation stores (replaces) a reservation as the ledger saw it;
// an end once recorded is kept.
func (s *Store) RecordReservation(ctx context.Context, r Reservation) error {
	end := nullMS(r.End)
	err := s.tx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO capacity_reservations(reservation_id, instance_type, zone, count, price, start, "end", state, match, seen, reservation_type) VALUES(?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(reservation_id) DO UPDATE SET instance_type=excluded.instance_type, zone=excluded.zone, count=excluded.count, price=excluded.price, start=excluded.start,
"end"=COALESCE(capacity_reservations."end", excluded."end"), state=excluded.state, match=excluded.match, seen=excluded.seen,
reservation_type=CASE WHEN excluded.reservation_type != '' THEN excluded.reservation_type ELSE capacity_reservations.reservation_type END`,
			r.ID, r.InstanceType, r.Zone, r.Count, r.PriceUSD, ms(r.Start), end, r.State, r.Match, ms(r.Seen), r.Type)
		return err
	})
	if err != nil {
		return fmt.Errorf("storing capacity reservation %s: %w", r.ID, err)
	}
	return nil
}

// Reservations lists every reservation the ledger has billed.
func (s *Store) Reservations(ctx context.Context) ([]Reservation, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT reservation_id, instance_type, zone, count, price, start, "end", state, match, seen, reservation_type FROM capacity_reservations ORDER BY start, reservation_id`)
	if err != nil {
		return nil, fmt.Errorf("reading capacity reservations: %w", err)
	}
	defer rows.Close()
	var out []Reservation
	for rows.Next() {
		var r Reservation
		var start, seen int64
		var end sql.NullInt64
		if err := rows.Scan(&r.ID, &r.InstanceType, &r.Zone, &r.Count, &r.PriceUSD, &start, &end, &r.State, &r.Match, &seen, &r.Type); err != nil {
			return nil, fmt.Errorf("reading capacity reservations: %w", err)
		}
		r.Start, r.End, r.Seen = time.UnixMilli(start).UTC(), fromMS(end), time.UnixMilli(seen).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// NoteReservations sets the reservation each instance (by id) runs in
// where its row has none yet.
func (s *Store) NoteReservations(ctx context.Context, byInstance map[string]string) error {
	err := s.tx(ctx, func(tx *Tx) error {
		for id, r := range byInstance {
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET reservation_id = ? WHERE instance_id = ? AND reservation_id = ''`, r, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("noting the capacity reservations of %d instances: %w", len(byInstance), err)
	}
	return nil
}
