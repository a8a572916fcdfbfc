package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/test/stack"
)

// TestRESTCredentialGuarded: with slurm.api rest, the JWT key lets whoever
// reads it act as any Slurm user, so burst refuses a key other users could
// read, saying which file and how to fix it, and a job (run as an ordinary
// user) cannot read it.
func TestRESTCredentialGuarded(t *testing.T) {
	s := start(t, stack.Options{SlurmAPI: "rest"})
	key := s.Cfg.Slurm.Rest.JWTKeyFile
	// a job of an ordinary user
	out, err := s.Cluster.Command(context.Background(), "/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
		"/bin/cat", key).CombinedOutput()
	if err == nil {
		t.Fatalf("user nobody read the JWT key %s: %q", key, out)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(key, 0o600)
	out, err = s.Cluster.Command(context.Background(), binDir+"/burst-resume", "--config", s.CfgPath, "a10g-1").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), key) || !strings.Contains(string(out), "chmod 600") {
		t.Fatalf("burst-resume with a world-readable JWT key: %v\n%s\nwant exit status 2 naming the file and the fix", err, out)
	}
	t.Logf("refused: %s", strings.TrimSpace(string(out)))
}
