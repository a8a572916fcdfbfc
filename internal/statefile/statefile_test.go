package statefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestUpdateSerialises: concurrent read-modify-write updates lose nothing.
func TestUpdateSerialises(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state", "counter")
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := Update(p, 0o600, func(old []byte) ([]byte, bool, error) {
				n, _ := strconv.Atoi(string(old))
				return []byte(strconv.Itoa(n + 1)), true, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, err := Read(p)
	if err != nil || string(b) != "20" {
		t.Fatalf("counter %q %v, want 20", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".counter.*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestUpdateWithoutWriteAndErrors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := Update(p, 0o644, func(old []byte) ([]byte, bool, error) { return []byte("x"), false, nil }); err != nil {
		t.Fatal(err)
	}
	if b, _ := Read(p); b != nil {
		t.Fatalf("a no-write update wrote %q", b)
	}
	want := fmt.Errorf("bad")
	if err := Update(p, 0o644, func([]byte) ([]byte, bool, error) { return nil, true, want }); err != want {
		t.Fatalf("error %v", err)
	}
}

func TestAppendAndTryLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := Append(p, 0o600, []byte(fmt.Sprintf("line %d\n", i))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, _ := Read(p)
	if n := strings.Count(string(b), "\n"); n != 10 {
		t.Fatalf("%d lines:\n%s", n, b)
	}
	unlock, ok, err := TryLock(p+".flush", 0o600)
	if err != nil || !ok {
		t.Fatalf("TryLock: %v %v", ok, err)
	}
	// flock is per open file: a second descriptor is refused while held
	if _, ok2, err := TryLock(p+".flush", 0o600); err != nil || ok2 {
		t.Fatalf("second TryLock: %v %v", ok2, err)
	}
	unlock()
	if u, ok, _ := TryLock(p+".flush", 0o600); !ok {
		t.Fatal("lock not released")
	} else {
		u()
	}
}

func TestFullSaysWhatToDo(t *testing.T) {
	err := Full("/var/lib/burst/instance-events.jsonl", fmt.Errorf("write: %w", syscall.ENOSPC))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "/var/lib/burst is full: free space there") {
		t.Errorf("a full disk: %v", err)
	}
	other := errors.New("permission denied")
	if Full("/x/y", other) != other {
		t.Errorf("another error changed: %v", Full("/x/y", other))
	}
}
