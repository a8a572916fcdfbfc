package moto_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/harness"
)

// motoServer is one moto server process (python3 -m moto.server) on a free
// loopback port, killed when the test ends.
type motoServer struct {
	URL string
	out *harness.SyncBuffer
}

// python is the interpreter that holds moto: $BURST_PYTHON, else python3
// on PATH.
func python() string {
	if p := os.Getenv("BURST_PYTHON"); p != "" {
		return p
	}
	return "python3"
}

// requireMoto skips the test in -short mode (it starts a server) and when
// moto cannot be imported, or then fails it under BURST_REQUIRE_TOOLS=1
// (make test, CI).
func requireMoto(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIPPING in -short mode (make test-unit): the moto contract tests run a moto server; make test runs them")
	}
	out, err := exec.Command(python(), "-c", "import moto, botocore; print(moto.__version__)").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("moto is not importable by %s (%v: %s); the contract tests need moto 5.x in that Python (the image's /root/.pyenv has it; set BURST_PYTHON to another interpreter)",
		python(), err, strings.TrimSpace(string(out)))
	if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
		t.Fatal(msg + "; BURST_REQUIRE_TOOLS=1 makes this a failure")
	}
	t.Skip("SKIPPING: " + msg + "; set BURST_REQUIRE_TOOLS=1 to make this a failure")
}

// startMoto runs a moto server whose IAM enforcement begins after
// noAuthActions unauthenticated actions (INITIAL_NO_AUTH_ACTION_COUNT),
// waits until it answers, and stops it (the whole process group) when the
// test ends.
func startMoto(t *testing.T, noAuthActions int) *motoServer {
	t.Helper()
	requireMoto(t)
	port := harness.LocalPort(t)
	cmd := exec.Command(python(), "-m", "moto.server", "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "INITIAL_NO_AUTH_ACTION_COUNT="+strconv.Itoa(noAuthActions), "MOTO_ALLOW_NONEXISTENT_REGION=false")
	s := &motoServer{URL: fmt.Sprintf("http://127.0.0.1:%d", port), out: &harness.SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	// its own process group (killed whole at cleanup), and killed with the
	// test binary should that die first (a go test timeout skips cleanups)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting moto (%s -m moto.server): %v", python(), err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("moto server output:\n%s", s.out.String())
		}
	})
	// moto-api answers without counting as an action, so readiness does
	// not use up the unauthenticated ones
	giveUp := time.Now().Add(2 * time.Minute) // a hang guard on a shared machine, not a performance bound
	for {
		select {
		case err := <-exited:
			t.Fatalf("moto server exited before answering: %v\n%s", err, s.out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/moto-api/", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(giveUp) {
			t.Fatalf("moto server on %s did not answer: %v\n%s", s.URL, err, s.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
