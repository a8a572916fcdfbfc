package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/cmdline/cmdlinetest"
	"github.com/burst-hpc/burst/internal/config/configtest"
	"github.com/burst-hpc/burst/internal/version"
)

func runSuspend(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	return configtest.RunProgram(t, run, "burst-suspend", env, args...)
}

func TestUsageErrorsExit2(t *testing.T) {
	path := configtest.Write(t, configtest.Demo(t))
	for _, args := range [][]string{{"--config", path}, {"--config", path, "a", "b"}, {"--config", path, "linger", "--nodes", "l4-1"},
		{"--config", path, "linger", "--until", time.Now().Format(time.RFC3339), "--nodes", "l4-["}} {
		if code, stderr := runSuspend(t, nil, args...); code != cmdline.ExitUsage {
			t.Errorf("%q: exit %d, want 2; stderr %s", args, code, stderr)
		}
	}
}

// TestConfigBeforeOrAfterLinger: --config names burst.yaml before the
// subcommand and after it (the epilog starts `burst-suspend --config X
// linger`), and wins over $BURST_CONFIG.
func TestConfigBeforeOrAfterLinger(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	until := []string{"--until", time.Now().Format(time.RFC3339Nano), "--nodes", "l4-1"}
	for _, args := range [][]string{append([]string{"--config", missing, "linger"}, until...), append([]string{"linger", "--config", missing}, until...)} {
		code, stderr := runSuspend(t, []string{"BURST_CONFIG=/nonexistent/other.yaml"}, args...)
		if code != cmdline.ExitFailure || !strings.Contains(stderr, missing) {
			t.Errorf("%q: exit %d, stderr %s; want the error to name %s", args, code, stderr, missing)
		}
	}
}

// TestEpilogNeverFails: as EpilogSlurmctld burst-suspend exits 0 even when
// Slurm cannot be asked (a failing epilog would drain the nodes).
func TestEpilogNeverFails(t *testing.T) {
	cfg := configtest.Demo(t)
	path := configtest.Write(t, cfg)
	env := []string{"SLURM_SCRIPT_CONTEXT=epilog_slurmctld", "SLURM_JOB_ID=5", "SLURM_JOB_NODELIST=l4-1", "BURST_LOG_FILE=" + cfg.Log.File}
	if code, stderr := runSuspend(t, env, "--config", path); code != 0 {
		t.Fatalf("epilog: exit %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(cfg.Log.File)
	if !strings.Contains(string(b), "release at job end") {
		t.Fatalf("the epilog's failure is not logged:\n%s", b)
	}
}

func TestParseIDs(t *testing.T) {
	if got := parseIDs("3,x,,0,12"); len(got) != 2 || got[0] != 3 || got[1] != 12 {
		t.Fatalf("parseIDs = %v", got)
	}
}

func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	if missing := cmdlinetest.MissingEnvVars(newApp(nil, nil)); len(missing) > 0 {
		t.Fatalf("flags without an environment variable: %v", missing)
	}
}

// TestVersion: `burst-suspend version` and --version print the release; a
// node named "version" cannot exist (burst names nodes <class>-<n>), so the
// word is never read as a hostlist.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out := runSuspend(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "burst-suspend "+version.Version+" (") {
			t.Errorf("%v: exit %d: %q", args, code, out)
		}
	}
}
