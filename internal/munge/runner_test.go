package munge

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startMunged runs a private munged with a fresh key in a temporary
// directory and returns its socket.
func startMunged(t *testing.T) string {
	t.Helper()
	munged, err := exec.LookPath("munged")
	if err != nil {
		for _, p := range []string{"/usr/sbin/munged", "/sbin/munged"} {
			if _, e := os.Stat(p); e == nil {
				munged, err = p, nil
			}
		}
	}
	if err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("munged not found (%v): scripts/install-deps.sh installs munge", err)
		}
		t.Skipf("SKIP: munged not found (%v); scripts/install-deps.sh installs munge", err)
	}
	dir, err := os.MkdirTemp("", "munge-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(filepath.Join(dir, "key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	cmd := exec.Command(munged, "--foreground", "--force", "--key-file", filepath.Join(dir, "key"), "--socket", sock,
		"--pid-file", filepath.Join(dir, "pid"), "--log-file", filepath.Join(dir, "log"), "--seed-file", filepath.Join(dir, "seed"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	t.Fatalf("munged did not make its socket within 20 s; its log:\n%s", log)
	return ""
}

// TestRealMunge: a credential from munge -n decodes to this process's
// uid; decoding it again is a replay; a credential of another munge key,
// a forged one and a malformed one are refused.
func TestRealMunge(t *testing.T) {
	ctx := context.Background()
	r := Runner{Socket: startMunged(t)}
	cred, err := r.Encode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.Decode(ctx, cred)
	if err != nil {
		t.Fatal(err)
	}
	if id.UID != os.Getuid() || id.GID != os.Getgid() || id.User == "" {
		t.Fatalf("decoded %+v; want uid %d gid %d with its name", id, os.Getuid(), os.Getgid())
	}
	if _, err := r.Decode(ctx, cred); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "Replayed") {
		t.Fatalf("decoding twice: %v; want a refused replay", err)
	}
	other := Runner{Socket: startMunged(t)}
	foreign, err := other.Encode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Decode(ctx, foreign); !errors.Is(err, ErrRefused) {
		t.Fatalf("a credential of another munge key: %v; want refused", err)
	}
	fresh, _ := r.Encode(ctx)
	forged := fresh[:len(fresh)-6] + "AAAAA:"
	if fresh[len(fresh)-6:len(fresh)-1] == "AAAAA" {
		forged = fresh[:len(fresh)-6] + "BBBBB:"
	}
	if _, err := r.Decode(ctx, forged); !errors.Is(err, ErrRefused) {
		t.Fatalf("a tampered credential: %v; want refused", err)
	}
	if _, err := r.Decode(ctx, "MUNGE:$(id):"); !errors.Is(err, ErrRefused) {
		t.Fatalf("a malformed credential: %v; want refused", err)
	}
	if _, err := (Runner{Socket: filepath.Join(t.TempDir(), "none")}).Encode(ctx); err == nil || !strings.Contains(err.Error(), "--socket") {
		t.Fatalf("encoding without munged: %v; want an error naming the socket", err)
	}
}
