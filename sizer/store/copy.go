package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// TableCopy is what Copy moved of one table and how it checked it.
type TableCopy struct {
	Table    string `json:"table"`
	Rows     int    `json:"rows"`     // in the source
	Copied   int    `json:"copied"`   // in the destination afterwards
	Checksum string `json:"checksum"` // SHA-256 of the table's rows, the same on both sides
}

// Copy copies every row of every table of src into dst (an empty store of
// the same schema version, typically PostgreSQL from SQLite) in one
// transaction, then checks every table: the same row count on both sides
// and the same checksum of the rows' values. Any difference is an error
// (the destination's transaction is committed by then: start again on an
// empty database).
func Copy(ctx context.Context, src, dst *Store) ([]TableCopy, error) {
	if dst.w == nil {
		return nil, ErrReadOnly
	}
	sv, _, err := src.SchemaVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the source's schema version: %w", err)
	}
	dv, _, err := dst.SchemaVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the destination's schema version: %w", err)
	}
	if sv != dv {
		return nil, fmt.Errorf("the source's schema is version %d, the destination's %d: run burst-sizer store migrate on both first", sv, dv)
	}
	tables, err := src.tables(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		var n int
		if err := dst.r.QueryRowContext(ctx, `SELECT count(*) FROM "`+t+`"`).Scan(&n); err != nil {
			return nil, fmt.Errorf("checking the destination's table %s: %w", t, err)
		}
		if n > 0 {
			return nil, fmt.Errorf("the destination's table %s already has %d rows: copy into an empty database (its schema only, as burst-sizer store migrate leaves it)", t, n)
		}
	}
	err = dst.tx(ctx, func(tx *Tx) error {
		for _, t := range tables {
			if err := copyTable(ctx, src, tx, t); err != nil {
				return fmt.Errorf("copying table %s: %w", t, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []TableCopy
	var bad []string
	for _, t := range tables {
		sr, err := src.tableRows(ctx, t)
		if err != nil {
			return nil, err
		}
		dr, err := dst.tableRows(ctx, t)
		if err != nil {
			return nil, err
		}
		tc := TableCopy{Table: t, Rows: len(sr), Copied: len(dr), Checksum: checksum(sr)}
		if dc := checksum(dr); tc.Rows != tc.Copied || dc != tc.Checksum {
			bad = append(bad, fmt.Sprintf("%s: %d rows, %d copied, checksum %s vs %s", t, tc.Rows, tc.Copied, tc.Checksum[:12], dc[:12]))
		}
		out = append(out, tc)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("the copy differs from the source: %s", strings.Join(bad, "; "))
	}
	return out, nil
}

func copyTable(ctx context.Context, src *Store, tx *Tx, table string) error {
	rows, err := src.r.QueryContext(ctx, `SELECT * FROM "`+table+`"`)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = `"` + c + `"`
	}
	ins := `INSERT INTO "` + table + `"(` + strings.Join(quoted, ",") + `) VALUES(?` + strings.Repeat(",?", len(cols)-1) + `)`
	for rows.Next() {
		vals, err := scanAny(rows, len(cols))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, ins, vals...); err != nil {
			return err
		}
	}
	return rows.Err()
}

// scanAny scans the current row's n columns as the driver gives them.
func scanAny(rows *sql.Rows, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	return vals, rows.Scan(ptrs...)
}

// changeLogTables are the ledger's and the usage's change logs: derived,
// the copy's own writes fill them.
var changeLogTables = []string{"ledger_changes", "usage_changes"}

// tables are the store's tables, less the migration library's own and the
// change logs.
func (s *Store) tables(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, s.tablesQuery())
	if err != nil {
		return nil, fmt.Errorf("listing tables: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		if n != VersionTable && n != "sqlite_sequence" && !slices.Contains(changeLogTables, n) {
			out = append(out, n)
		}
	}
	return out, rows.Err()
}

// tableRows is every row of a table as text (as Dump writes them), sorted.
func (s *Store) tableRows(ctx context.Context, table string) ([]string, error) {
	rs, err := s.r.QueryContext(ctx, `SELECT * FROM "`+table+`"`)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", table, err)
	}
	defer rs.Close()
	out, err := rowsText(rs)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", table, err)
	}
	slices.Sort(out)
	return out, nil
}

// rowsText writes each row's values as text, " | " between them.
func rowsText(rs *sql.Rows) ([]string, error) {
	cols, err := rs.Columns()
	if err != nil {
		return nil, err
	}
	out := []string{}
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, err
		}
		var b strings.Builder
		for i, v := range vals {
			if i > 0 {
				b.WriteString(" | ")
			}
			switch x := v.(type) {
			case nil:
				b.WriteString("NULL")
			case []byte:
				b.Write(x)
			case int64:
				b.WriteString(strconv.FormatInt(x, 10))
			case float64:
				b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
			default:
				fmt.Fprint(&b, x)
			}
		}
		out = append(out, b.String())
	}
	return out, rs.Err()
}

func checksum(rows []string) string {
	h := sha256.New()
	for _, r := range rows {
		h.Write([]byte(r))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}
