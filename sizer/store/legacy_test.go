package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A SQLite database from before versioned migrations, with a row in every
// table, opens, migrates to the baseline and loses nothing: every row is
// there with the same values, and the instances columns added since the
// first release are there with their defaults.
func TestMigratesAPreGooseDatabase(t *testing.T) {
	for _, withLedgerColumns := range []bool{false, true} {
		t.Run(fmt.Sprint("ledger_columns=", withLedgerColumns), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			legacy, err := os.ReadFile("testdata/pre-goose-schema.sql")
			if err != nil {
				t.Fatal(err)
			}
			raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Exec(string(legacy)); err != nil {
				t.Fatal(err)
			}
			if withLedgerColumns { // as the sizer before this change left it
				for _, c := range legacyColumns {
					if _, err := raw.Exec("ALTER TABLE instances ADD COLUMN " + c[0] + " " + c[1]); err != nil {
						t.Fatal(err)
					}
				}
			}
			tables := fillEveryTable(t, raw)
			raw.Close()
			before := dumpSQLite(t, dir)

			s, err := Open(ctx, dir)
			if err != nil {
				t.Fatalf("opening the pre-migration database: %v", err)
			}
			cur, newest, err := s.SchemaVersion(ctx)
			if err != nil || cur != newest || cur < 1 {
				t.Errorf("schema version %d of %d: %v", cur, newest, err)
			}
			s.Close()
			after := dumpSQLite(t, dir)
			for _, tb := range tables {
				if merged(t, tb, before, after) {
					continue
				}
				if len(before[tb]) != 1 || len(after[tb]) != 1 {
					t.Errorf("%s: %d rows before, %d after, want 1 and 1", tb, len(before[tb]), len(after[tb]))
					continue
				}
				want := before[tb][0]
				if tb == "instances" && !withLedgerColumns {
					want += " | " + "" + " | " + "" + " | " + "" + " | 0 | " + "" + " | resume | " + "" + " | " + ""
				}
				if tb == "instances" || slices.Contains(perJobTables, tb) {
					want += " | " // migrations 7's and 10's cluster, '' for rows before them (opened with no cluster.name)
				}
				if tb == "instances" {
					want += " | " // migration 12's reservation_id, '' for rows before it
				}
				if after[tb][0] != want {
					t.Errorf("%s row changed:\n before %q\n  after %q", tb, want, after[tb][0])
				}
			}
			if after[VersionTable] == nil {
				t.Errorf("no %s after migrating", VersionTable)
			}
			// and it opens again without migrating anything twice
			s, err = Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		})
	}
}

// merged checks the tables migration 00008 merged or dropped (job_history
// into jobs, records_seen; their values: TestMigratesJobHistoryIntoJobs):
// jobs holds its row, with no run, and job_history's.
func merged(t *testing.T, tb string, before, after map[string][]string) bool {
	t.Helper()
	switch tb {
	case "jobs":
		// then migration 10's cluster ('') and 13's submitted (NULL)
		want := before["jobs"][0] + " | NULL | NULL | NULL | NULL | 0 | NULL |  | NULL"
		if len(after["jobs"]) != 2 || !slices.Contains(after["jobs"], want) {
			t.Errorf("jobs after the merge %q, want %q and job_history's row", after["jobs"], want)
		}
	case "job_history", "records_seen":
		if _, ok := after[tb]; ok {
			t.Errorf("%s still there after migrating", tb)
		}
	default:
		return false
	}
	return true
}

// fillEveryTable inserts one row into every table, a value of its type in
// every column, and returns the tables.
func fillEveryTable(t *testing.T, raw *sql.DB) []string {
	t.Helper()
	rows, err := raw.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		if n != VersionTable && n != "sqlite_sequence" {
			tables = append(tables, n)
		}
	}
	rows.Close()
	for i, tb := range tables {
		cols, err := raw.Query(`SELECT name, type FROM pragma_table_info(?)`, tb)
		if err != nil {
			t.Fatal(err)
		}
		var names, vals []string
		for cols.Next() {
			var n, typ string
			cols.Scan(&n, &typ)
			names = append(names, `"`+n+`"`)
			switch {
			case n == "id": // a one-row table
				vals = append(vals, "1")
			case typ == "INTEGER":
				vals = append(vals, fmt.Sprint(1000+i))
			case typ == "REAL":
				vals = append(vals, fmt.Sprint(float64(i)+0.25))
			default:
				vals = append(vals, fmt.Sprintf("'%s-%d'", tb, i))
			}
		}
		cols.Close()
		if _, err := raw.Exec(fmt.Sprintf(`INSERT INTO "%s"(%s) VALUES(%s)`, tb, strings.Join(names, ","), strings.Join(vals, ","))); err != nil {
			t.Fatalf("filling %s: %v", tb, err)
		}
	}
	return tables
}

func dumpSQLite(t *testing.T, dir string) map[string][]string {
	t.Helper()
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	d, err := ro.Dump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}
