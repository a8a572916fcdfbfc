package store

import "testing"

// The rewrite of the store's SQLite queries for PostgreSQL, by hand.
func TestPGQuery(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT a FROM t WHERE x = ? AND y = ?`, `SELECT a FROM t WHERE x = $1 AND y = $2`},
		{`SELECT a FROM t WHERE x = ?1 OR y = ?1`, `SELECT a FROM t WHERE x = $1 OR y = $1`},
		{`SELECT '?' FROM t WHERE x = ?`, `SELECT '?' FROM t WHERE x = $1`},
		{`INSERT OR IGNORE INTO t(a, b) VALUES(?,?)`, `INSERT INTO t(a, b) VALUES($1,$2) ON CONFLICT DO NOTHING`},
		{`SELECT max(a), min(b), max(a, b), MIN(coalesce(a, 0), b) FROM t`, `SELECT max(a), min(b), greatest(a, b), least(coalesce(a, 0), b) FROM t`},
		{`SELECT sum(x / max(y, 1)) FROM t`, `SELECT sum(x / greatest(y, 1)) FROM t`},
		{`SELECT user, j.user, users FROM jobs j`, `SELECT "user", j."user", users FROM jobs j`},
		{`SELECT v FROM t WHERE id IN (SELECT value FROM json_each(?))`, `SELECT v FROM t WHERE id IN (SELECT value FROM jsonb_array_elements_text(CAST($1 AS jsonb)))`},
		{"INSERT INTO t(k, n, s) VALUES(?,?,?)\nON CONFLICT(k) DO UPDATE SET n = max(n, excluded.n), s = CASE WHEN excluded.s != '' THEN excluded.s ELSE s END",
			"INSERT INTO t(k, n, s) VALUES($1,$2,$3)\nON CONFLICT(k) DO UPDATE SET n = greatest(t.n, excluded.n), s = CASE WHEN excluded.s != '' THEN excluded.s ELSE t.s END"},
		{`INSERT INTO job_runs(a, "end") VALUES(?,?) ON CONFLICT(a) DO UPDATE SET "end" = coalesce("end", excluded."end"), user = excluded.user`,
			`INSERT INTO job_runs(a, "end") VALUES($1,$2) ON CONFLICT(a) DO UPDATE SET "end" = coalesce(job_runs."end", excluded."end"), "user" = excluded."user"`},
	} {
		if got := pgQuery(c.in); got != c.want {
			t.Errorf("pgQuery(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}
