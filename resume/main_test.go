package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/cmdline/cmdlinetest"
	"github.com/burst-hpc/burst/internal/config/configtest"
	"github.com/burst-hpc/burst/internal/version"
)

func runResume(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	return configtest.RunProgram(t, run, "burst-resume", env, args...)
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestUsageAndConfigErrorsExit2(t *testing.T) {
	cfg := configtest.Demo(t)
	path := configtest.Write(t, cfg)
	for _, args := range [][]string{{"--config", path}, {"--config", path, "l4-1", "l4-2"}, {"--bogus"}} {
		if code, stderr := runResume(t, nil, args...); code != cmdline.ExitUsage {
			t.Errorf("%q: exit %d, want 2; stderr %s", args, code, stderr)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("cluster: {name: x, regoin: us-east-1}\n"), 0o600)
	startup := filepath.Join(t.TempDir(), "startup.log")
	code, stderr := runResume(t, []string{"BURST_LOG_FILE=" + startup}, "--config", bad, "l4-1")
	if code != cmdline.ExitUsage || !strings.Contains(stderr, "cluster.regoin: unknown key") {
		t.Errorf("broken burst.yaml: exit %d, stderr %s", code, stderr)
	}
	// Slurm discards stderr: the failure is in the default (here: given) log too
	if log := readLog(t, startup); !strings.Contains(log, `"msg":"cannot start"`) || !strings.Contains(log, "regoin") {
		t.Errorf("startup log:\n%s", log)
	}
	// $BURST_CONFIG (from the environment run is given) names the file too
	if code, stderr := runResume(t, []string{"BURST_CONFIG=" + bad}, "l4-1"); code != cmdline.ExitUsage || !strings.Contains(stderr, bad) {
		t.Errorf("BURST_CONFIG: exit %d, stderr %s", code, stderr)
	}
}

// TestPrologNeverFails: as PrologSlurmctld burst-resume waits for the job's
// nodes and exits 0 whatever happens (a failing prolog would fail the job).
func TestPrologNeverFails(t *testing.T) {
	cfg := configtest.Demo(t)
	path := configtest.Write(t, cfg)
	env := []string{"SLURM_SCRIPT_CONTEXT=prolog_slurmctld", "SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=l4-[", "BURST_LOG_FILE=" + cfg.Log.File}
	if code, stderr := runResume(t, env, "--config", path); code != 0 {
		t.Fatalf("prolog: exit %d: %s", code, stderr)
	}
	if log := readLog(t, cfg.Log.File); !strings.Contains(log, `"msg":"prolog"`) || !strings.Contains(log, `"job":"7"`) {
		t.Fatalf("prolog not logged:\n%s", log)
	}
}

// TestResumeKeepsResumeFile: the resume file is read at once (through
// slurm.ReadResumeFile) and a copy kept in the state directory; a node in no
// class is handed back, and a Slurm that cannot be told fails the resume.
func TestResumeKeepsResumeFile(t *testing.T) {
	cfg := configtest.Demo(t)
	path := configtest.Write(t, cfg)
	rf := filepath.Join(t.TempDir(), "resume.json")
	doc := `{"jobs":[{"job_id":9,"nodes":"x-1"}],"all_nodes":"x-1"}`
	os.WriteFile(rf, []byte(doc), 0o600)
	code, _ := runResume(t, []string{"SLURM_RESUME_FILE=" + rf, "BURST_LOG_FILE=" + cfg.Log.File}, "--config", path, "x-1")
	if code != cmdline.ExitFailure {
		t.Errorf("exit %d, want 1 (Slurm's commands are missing)", code)
	}
	copies, _ := filepath.Glob(filepath.Join(cfg.Sizer.StateDir, "resume-files", "*.json"))
	if len(copies) != 1 || readLog(t, copies[0]) != doc {
		t.Fatalf("resume-file copies %v", copies)
	}
	log := readLog(t, cfg.Log.File)
	for _, want := range []string{"burst: node x-1 is in no class", "telling Slurm about failed nodes"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	if missing := cmdlinetest.MissingEnvVars(newApp(nil, resumeFile{}, nil)); len(missing) > 0 {
		t.Fatalf("flags without an environment variable: %v", missing)
	}
}

// TestVersion: `burst-resume version` and --version print the release; a
// node named "version" cannot exist (burst names nodes <class>-<n>), so the
// word is never read as a hostlist.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out := runResume(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "burst-resume "+version.Version+" (") {
			t.Errorf("%v: exit %d: %q", args, code, out)
		}
	}
}
