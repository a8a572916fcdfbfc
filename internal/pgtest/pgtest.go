// Package pgtest starts a throwaway PostgreSQL server for tests: initdb
// into a temporary directory, postgres listening only on a unix socket in
// it, stopped and removed in t.Cleanup. PostgreSQL refuses to run as root,
// so under root the server runs as the postgres user (Debian's package
// creates it), else as nobody.
//
// Without PostgreSQL's binaries (Debian: apt-get install postgresql) a test
// is skipped, or fails under BURST_REQUIRE_TOOLS=1.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// BinDir finds PostgreSQL's server binaries: $BURST_PG_BINDIR, else the
// newest /usr/lib/postgresql/*/bin, else initdb on PATH.
func BinDir() (string, error) {
	if d := os.Getenv("BURST_PG_BINDIR"); d != "" {
		return d, nil
	}
	ds, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(ds, func(i, j int) bool { return version(ds[i]) > version(ds[j]) })
	for _, d := range ds {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("PostgreSQL's initdb not found (apt-get install postgresql, or set BURST_PG_BINDIR)")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Server is a running throwaway PostgreSQL.
type Server struct {
	Dir  string // data directory and socket
	User string // the database superuser
	cmd  *exec.Cmd
}

// URL is a DSN for database db on the server (no password: trust auth on
// the socket only).
func (s *Server) URL(db string) string {
	return fmt.Sprintf("host=%s port=5432 user=%s dbname=%s sslmode=disable", s.Dir, s.User, db)
}

// Start starts a server or skips t (fails it under BURST_REQUIRE_TOOLS=1).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%v; BURST_REQUIRE_TOOLS=1 makes this a failure", err)
		}
		t.Skipf("SKIPPING: %v; set BURST_REQUIRE_TOOLS=1 to make this a failure", err)
	}
	dir, err := os.MkdirTemp("", "burst-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred, err = runAs()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &Server{Dir: dir, User: "burst"}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", s.User, "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-c", "listen_addresses=", "-c", "fsync=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB")
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		os.Chown(logf.Name(), int(cred.Uid), int(cred.Gid))
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting postgres: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-exited
		}
	})
	sock := filepath.Join(dir, ".s.PGSQL.5432")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			if s.ping() == nil {
				break
			}
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			t.Fatalf("postgres exited: %v\n%s", err, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			t.Fatalf("postgres did not accept connections within 60s\n%s", log)
		}
	}
	return s
}

func (s *Server) ping() error {
	db, err := sql.Open("pgx", s.URL("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

var seq atomic.Int64

// NewDatabase creates an empty database and returns its DSN.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), seq.Add(1))
	db, err := sql.Open("pgx", s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	return s.URL(name)
}

func runAs() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("PostgreSQL refuses to run as root and neither a postgres nor a nobody user exists")
}
