package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Postgres locates a PostgreSQL database (sizer.store with driver
// postgres).
type Postgres struct {
	// URL is a postgres:// URL or a key=value DSN, without the password.
	URL string
	// PasswordFile holds the password (one line; not group or world
	// readable).
	PasswordFile string
	// TLSMode: "" (what the URL says), disable, require (encrypt, no
	// verification) or verify-full (the server's certificate against
	// CAFile, or the system roots, and its host name).
	TLSMode  string
	CAFile   string
	CertFile string // client certificate (optional, with KeyFile)
	KeyFile  string
	// MaxConns bounds the pool (default 8).
	MaxConns int
}

// TLS modes of Postgres.TLSMode.
const (
	TLSDisable    = "disable"
	TLSRequire    = "require"
	TLSVerifyFull = "verify-full"
)

// connConfig parses the URL and applies the password file and TLS options.
func (p Postgres) connConfig() (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(p.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing sizer.store.url: %w (a postgres://host/db URL or a key=value DSN)", err)
	}
	if p.PasswordFile != "" {
		pw, err := readPasswordFile(p.PasswordFile)
		if err != nil {
			return nil, err
		}
		cc.Password = pw
	}
	switch p.TLSMode {
	case "":
	case TLSDisable:
		cc.TLSConfig = nil
		cc.Fallbacks = nil
	case TLSRequire, TLSVerifyFull:
		tc := &tls.Config{ServerName: cc.Host, MinVersion: tls.VersionTLS12}
		if p.TLSMode == TLSRequire {
			tc.InsecureSkipVerify = true
		}
		if p.CAFile != "" {
			pem, err := os.ReadFile(p.CAFile)
			if err != nil {
				return nil, fmt.Errorf("reading sizer.store.tls.ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("sizer.store.tls.ca_file %s holds no PEM certificate", p.CAFile)
			}
			tc.RootCAs = pool
		}
		if p.CertFile != "" {
			c, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("loading sizer.store.tls.cert_file and key_file: %w", err)
			}
			tc.Certificates = []tls.Certificate{c}
		}
		cc.TLSConfig = tc
		cc.Fallbacks = nil // never fall back to plain text
	default:
		return nil, fmt.Errorf("sizer.store.tls.mode %q: want disable, require or verify-full", p.TLSMode)
	}
	return cc, nil
}

func readPasswordFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("reading sizer.store.password_file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("sizer.store.password_file %s is readable by others (mode %v): chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading sizer.store.password_file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" || strings.ContainsAny(pw, "\r\n") {
		return "", fmt.Errorf("sizer.store.password_file %s: want the password on one line", path)
	}
	return pw, nil
}

// OpenPostgres opens a PostgreSQL database and migrates its schema (two
// sizers migrating at once take turns under an advisory lock).
func OpenPostgres(ctx context.Context, p Postgres, opts ...Option) (*Store, error) {
	return openPostgres(ctx, p, false, opts)
}

func openPostgres(ctx context.Context, p Postgres, readOnly bool, opts []Option) (*Store, error) {
	cc, err := p.connConfig()
	if err != nil {
		return nil, err
	}
	if readOnly {
		if cc.RuntimeParams == nil {
			cc.RuntimeParams = map[string]string{}
		}
		cc.RuntimeParams["default_transaction_read_only"] = "on"
	}
	addr := fmt.Sprintf("postgres %s:%d/%s", cc.Host, cc.Port, cc.Database)
	sdb := stdlib.OpenDB(*cc)
	n := p.MaxConns
	if n <= 0 {
		n = 8
	}
	sdb.SetMaxOpenConns(n)
	if err := sdb.PingContext(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	d := &db{DB: sdb, driver: DriverPostgres}
	if readOnly {
		return &Store{r: d, path: addr, driver: DriverPostgres, cluster: clusterOf(opts)}, nil
	}
	if err := migrate(ctx, sdb, DriverPostgres, clusterOf(opts)); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("migrating the sizer schema in %s: %w", addr, err)
	}
	return newStore(d, d, addr, opts), nil
}

// Config chooses the store: SQLite in Dir (the default) or PostgreSQL.
type Config struct {
	Driver   string // DriverSQLite ("" too) or DriverPostgres
	Dir      string // SQLite: the state directory
	Postgres Postgres
	Cluster  string // cluster.name (ForCluster)
}

// OpenConfig opens the store cfg names.
func OpenConfig(ctx context.Context, cfg Config, opts ...Option) (*Store, error) {
	opts = append([]Option{ForCluster(cfg.Cluster)}, opts...)
	switch cfg.Driver {
	case "", DriverSQLite:
		return Open(ctx, cfg.Dir, opts...)
	case DriverPostgres:
		return OpenPostgres(ctx, cfg.Postgres, opts...)
	}
	return nil, errors.New("sizer.store.driver " + cfg.Driver + ": want sqlite or postgres")
}

// OpenReadOnlyConfig opens the store cfg names for reading only (the
// local paths with the daemon down): SQLite's file read-only (an error
// wrapping ErrNoState when there is none), or PostgreSQL with read-only
// transactions and no migration.
func OpenReadOnlyConfig(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Driver == DriverPostgres {
		return openPostgres(ctx, cfg.Postgres, true, []Option{ForCluster(cfg.Cluster)})
	}
	s, err := OpenReadOnly(cfg.Dir)
	if err == nil {
		s.cluster = cfg.Cluster // reads its own cluster's jobs
	}
	return s, err
}
