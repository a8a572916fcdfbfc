package store

import (
	"context"
	"database/sql"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Driver names (sizer.store.driver).
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// The store's queries are written in SQLite's dialect; on PostgreSQL each
// is rewritten once (and cached) by pgQuery: ? and ?N placeholders become
// $N, INSERT OR IGNORE becomes ON CONFLICT DO NOTHING, the two-argument
// scalar max/min become greatest/least, json_each becomes
// jsonb_array_elements_text, and the column user (a reserved word there)
// is quoted. Booleans are passed as 0/1, as SQLite stores them.

// db is a database handle that speaks the store's dialect.
type db struct {
	*sql.DB
	driver string
}

// Tx is one transaction of the store.
type Tx struct {
	*sql.Tx
	driver string
}

func (d *db) q(query string) string { return rewrite(d.driver, query) }

func (d *db) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return d.DB.QueryContext(ctx, d.q(query), pgArgs(d.driver, args)...)
}

func (d *db) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return d.DB.QueryRowContext(ctx, d.q(query), pgArgs(d.driver, args)...)
}

func (d *db) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return d.DB.ExecContext(ctx, d.q(query), pgArgs(d.driver, args)...)
}

// ExecContext runs a statement in the transaction.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, rewrite(t.driver, query), pgArgs(t.driver, args)...)
}

// QueryContext runs a query in the transaction.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, rewrite(t.driver, query), pgArgs(t.driver, args)...)
}

// QueryRowContext runs a one-row query in the transaction.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, rewrite(t.driver, query), pgArgs(t.driver, args)...)
}

func pgArgs(driver string, args []any) []any {
	if driver != DriverPostgres {
		return args
	}
	var out []any
	for i, a := range args {
		if b, ok := a.(bool); ok {
			if out == nil {
				out = append([]any(nil), args...)
			}
			out[i] = int64(0)
			if b {
				out[i] = int64(1)
			}
		}
	}
	if out == nil {
		return args
	}
	return out
}

var pgCache sync.Map // SQLite query -> PostgreSQL query

func rewrite(driver, query string) string {
	if driver != DriverPostgres {
		return query
	}
	if v, ok := pgCache.Load(query); ok {
		return v.(string)
	}
	out := pgQuery(query)
	pgCache.Store(query, out)
	return out
}

var (
	userCol  = regexp.MustCompile(`(^|[^"\w])user([^"\w]|$)`)
	jsonEach = regexp.MustCompile(`json_each\(([^)]*)\)`)
)

// pgQuery rewrites one query from SQLite's dialect to PostgreSQL's.
func pgQuery(q string) string {
	if rest, ok := strings.CutPrefix(q, "INSERT OR IGNORE INTO"); ok {
		q = "INSERT INTO" + rest + " ON CONFLICT DO NOTHING"
	}
	q = qualifyUpsert(q)
	q = scalarMinMax(q)
	q = userCol.ReplaceAllString(q, `${1}"user"${2}`)
	q = jsonEach.ReplaceAllString(q, "jsonb_array_elements_text(CAST(${1} AS jsonb))")
	return placeholders(q)
}

var (
	insertInto = regexp.MustCompile(`^\s*INSERT INTO (\w+)`)
	identifier = regexp.MustCompile(`'[^']*'|("[^"]*"|[A-Za-z_][A-Za-z_0-9]*)(\.("[^"]*"|[A-Za-z_][A-Za-z_0-9]*))?\s*\(?`)
	sqlWords   = map[string]bool{"case": true, "when": true, "then": true, "else": true, "end": true, "or": true, "and": true,
		"is": true, "null": true, "not": true, "in": true, "where": true}
)

// qualifyUpsert names the table in front of the existing row's columns in
// an upsert's DO UPDATE SET expressions: SQLite reads a bare column there
// as the existing row's, PostgreSQL finds it ambiguous with excluded's.
func qualifyUpsert(q string) string {
	m := insertInto.FindStringSubmatch(q)
	i := strings.Index(q, "DO UPDATE SET")
	if m == nil || i < 0 {
		return q
	}
	table := m[1]
	head, set := q[:i+len("DO UPDATE SET")], q[i+len("DO UPDATE SET"):]
	var parts []string
	depth, start := 0, 0
	for j := 0; j < len(set); j++ {
		switch set[j] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, set[start:j])
				start = j + 1
			}
		}
	}
	parts = append(parts, set[start:])
	for k, a := range parts {
		lhs, rhs, ok := strings.Cut(a, "=")
		if !ok {
			continue
		}
		rhs = identifier.ReplaceAllStringFunc(rhs, func(w string) string {
			if strings.HasPrefix(w, "'") || strings.HasSuffix(w, "(") || strings.Contains(w, ".") || sqlWords[strings.ToLower(strings.TrimSpace(w))] {
				return w
			}
			return table + "." + w
		})
		parts[k] = lhs + "=" + rhs
	}
	return head + strings.Join(parts, ",")
}

// placeholders turns ? into $1, $2, ... and ?N into $N, outside string
// literals.
func placeholders(q string) string {
	var b strings.Builder
	n, inStr := 0, false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			inStr = !inStr
			b.WriteByte(c)
		case c == '?' && !inStr:
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			if j > i+1 {
				b.WriteString("$" + q[i+1:j])
				i = j - 1
				continue
			}
			n++
			b.WriteString("$" + strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// scalarMinMax rewrites max(a, b) and min(a, b) (SQLite's scalar forms,
// two or more arguments) to greatest and least; one-argument max and min
// are aggregates in both dialects and stay.
func scalarMinMax(q string) string {
	var b strings.Builder
	lower := strings.ToLower(q)
	for i := 0; i < len(q); i++ {
		fn := ""
		if strings.HasPrefix(lower[i:], "max(") {
			fn = "greatest("
		} else if strings.HasPrefix(lower[i:], "min(") {
			fn = "least("
		}
		if fn == "" || (i > 0 && isIdent(q[i-1])) {
			b.WriteByte(q[i])
			continue
		}
		// find the matching parenthesis and any comma at depth one
		depth, comma := 0, false
		for j := i + 3; j < len(q); j++ {
			switch q[j] {
			case '(':
				depth++
			case ')':
				depth--
			case ',':
				if depth == 1 {
					comma = true
				}
			}
			if depth == 0 {
				break
			}
		}
		if !comma {
			b.WriteByte(q[i])
			continue
		}
		b.WriteString(fn)
		i += 3
	}
	return b.String()
}

func isIdent(c byte) bool {
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
