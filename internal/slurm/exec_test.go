package slurm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

const sigUSR1Bit = uint64(1) << (10 - 1)
const sigTERMBit = uint64(1) << (15 - 1)

// sigBlk reports the SigBlk mask that `grep SigBlk /proc/self/status` prints.
func sigBlk(t testing.TB, out []byte) uint64 {
	t.Helper()
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "SigBlk:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("parsing %q: %v", line, err)
			}
			return m
		}
	}
	t.Fatalf("no SigBlk line in %q", out)
	return 0
}

// TestSigmaskHelper is not a test: it is the child process of
// TestStartUnblocked, started with SIGUSR1 and SIGTERM blocked the way
// slurmctld starts its hooks. It starts grep twice, with exec.Cmd.Start and
// with StartUnblocked, and prints both children's SigBlk.
func TestSigmaskHelper(t *testing.T) {
	if os.Getenv("BURST_SIGMASK_HELPER") != "1" {
		t.Skip("helper process for TestStartUnblocked")
	}
	for _, unblocked := range []bool{false, true} {
		var out bytes.Buffer
		cmd := exec.Command("/bin/grep", "SigBlk", "/proc/self/status")
		cmd.Stdout = &out
		var err error
		if unblocked {
			err = StartUnblocked(cmd)
		} else {
			err = cmd.Start()
		}
		if err == nil {
			err = cmd.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("unblocked=%v %s", unblocked, out.String())
	}
}

func TestStartUnblocked(t *testing.T) {
	// Start this test binary with SIGUSR1+SIGTERM blocked: fork it from a
	// locked thread whose mask has them blocked.
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestSigmaskHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "BURST_SIGMASK_HELPER=1")
	cmd.Stdout = &out
	cmd.Stderr = &out
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := setThreadSigmask(sigUSR1Bit | sigTERMBit); err != nil {
			errc <- err
			return
		}
		errc <- cmd.Start()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	var plain, clean uint64
	var sawPlain, sawClean bool
	for _, line := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "unblocked=false "); ok {
			plain, sawPlain = sigBlk(t, []byte(rest)), true
		}
		if rest, ok := strings.CutPrefix(line, "unblocked=true "); ok {
			clean, sawClean = sigBlk(t, []byte(rest)), true
		}
	}
	if !sawPlain || !sawClean {
		t.Fatalf("helper output lacks results:\n%s", out.String())
	}
	t.Logf("child SigBlk via exec.Cmd.Start: %#x, via StartUnblocked: %#x", plain, clean)
	// The premise: Go passes the inherited SIGUSR1 block on to children.
	if plain&sigUSR1Bit == 0 {
		t.Errorf("expected exec.Cmd.Start child to inherit blocked SIGUSR1 (mask %#x); premise of StartUnblocked changed", plain)
	}
	if clean != 0 {
		t.Errorf("StartUnblocked child has signal mask %#x, want 0", clean)
	}
}
