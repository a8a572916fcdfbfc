package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/config/configtest"
)

// TestPlainHTTPSlurmrestdExits2: the README's old example, slurmrestd at
// http://10.0.0.10:6820, would send a SlurmUser token in clear text; Slurm's
// ResumeProgram refuses it at config load (exit 2) with both fixes named.
func TestPlainHTTPSlurmrestdExits2(t *testing.T) {
	cfg := configtest.Demo(t)
	key := filepath.Join(t.TempDir(), "jwt_hs256.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Slurm.API = "rest"
	cfg.Slurm.Rest.URL, cfg.Slurm.Rest.User, cfg.Slurm.Rest.JWTKeyFile = "http://10.0.0.10:6820", "slurm", key
	code, stderr := runResume(t, nil, "--config", configtest.Write(t, cfg), "l4-1")
	if code != cmdline.ExitUsage {
		t.Errorf("exit %d, want %d; stderr %s", code, cmdline.ExitUsage, stderr)
	}
	for _, want := range []string{"slurm.rest.url", "clear text", "slurm.rest.ca_file", "unix:/run/slurmrestd/slurmrestd.socket"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
