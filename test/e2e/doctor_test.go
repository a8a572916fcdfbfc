package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/stack"
)

// doctor runs the built burst-sizer doctor against the stack's burst.yaml;
// the output is its standard output, then its standard error.
func doctor(t *testing.T, s *stack.Stack, args ...string) (string, int) {
	t.Helper()
	// where the cluster's Slurm runs (a Debian root's for 24.11 and 26.05),
	// as burst-sizer serve and the hooks do
	cmd := s.Cluster.Command(context.Background(), filepath.Join(binDir, "burst-sizer"), append([]string{"--config", s.CfgPath, "doctor", "--slurm-conf", s.Cluster.ConfPath()}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out) + stderr.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("running burst-sizer doctor: %v", err)
	}
	return string(out) + stderr.String(), 0
}

// TestDoctor runs burst-sizer doctor on a real install (real Slurm, the
// sizer daemon, the EC2 emulator with DryRun and its SQS queue): all ok;
// then breaks it (the token readable by others, TerminateInstances denied
// by IAM, an AMI that does not exist) and expects each named, exit 1.
func TestDoctor(t *testing.T) {
	s := start(t, stack.Options{})
	out, code := doctor(t, s)
	t.Logf("doctor on a complete install:\n%s", out)
	if code != 0 {
		t.Fatalf("doctor on a complete install: exit %d", code)
	}
	for _, want := range []string{"ok   config:", "ok   slurm ", "ok   admin token ", "ok   state dir ", "ok   sizer reachable at ",
		"ok   iam ec2:RunInstances: allowed (DryRun)", "ok   iam ec2:TerminateInstances", "ok   subnet ", "ok   security group ", "ok   ami ", "ok   interruption queue "} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q", want)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("a FAIL on a complete install")
	}

	if err := os.Chmod(s.Cfg.Sizer.TokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(s.Cfg.Sizer.TokenFile, 0o600)
	s.Emu.Deny("TerminateInstances")
	defer s.Emu.Allow("TerminateInstances")
	ami := s.Cfg.Image.AMI
	if err := s.UpdateConfig(func(c *config.Config) { c.Image.AMI = "ami-0fffffffffffffff0" }); err != nil {
		t.Fatal(err)
	}
	defer s.UpdateConfig(func(c *config.Config) { c.Image.AMI = ami })
	out, code = doctor(t, s, "--json")
	if code != 1 || !strings.Contains(out, "burst-sizer: 3 check(s) failed") {
		t.Errorf("doctor on a broken install: exit %d, want 1 and the count on stderr\n%s", code, out)
	}
	var rep struct {
		Checks []struct{ Check, Status, Detail, Fix string } `json:"checks"`
	}
	// stdout is the report; the last line is stderr's "burst-sizer: 3 check(s) failed"
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	failed := map[string]string{}
	for _, c := range rep.Checks {
		if c.Status == "FAIL" {
			failed[strings.Fields(c.Check)[0]+" "+strings.Fields(c.Check)[1]] = c.Detail + " -> " + c.Fix
		}
	}
	t.Logf("failures: %v", failed)
	for k, want := range map[string]string{"admin token": "chmod 600", "iam ec2:TerminateInstances": "denied", "ami ami-0fffffffffffffff0": "does not exist"} {
		if !strings.Contains(failed[k], want) {
			t.Errorf("check %q: %q, want a FAIL with %q", k, failed[k], want)
		}
	}
	if len(failed) != 3 {
		t.Errorf("%d failures, want exactly the 3 broken things: %v", len(failed), failed)
	}
}

// TestAdminCLIReachesSizer: the admin's commands that ask the daemon
// (ledger, ledger --sync, spend --account) pin sizer.tls.ca_file and get
// its answer, and every program prints its version.
func TestAdminCLIReachesSizer(t *testing.T) {
	s := start(t, stack.Options{})
	run := func(args ...string) string {
		t.Helper()
		cmd := s.Cluster.Command(context.Background(), filepath.Join(binDir, "burst-sizer"), append([]string{"--config", s.CfgPath}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("burst-sizer %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("ledger"); strings.Contains(out, "no CA to pin") {
		t.Errorf("ledger: %s", out)
	}
	run("ledger", "--sync")
	if out := run("spend", "--account", "demo", "--json"); !strings.Contains(out, `"account":"demo"`) || !strings.Contains(out, `"source"`) {
		t.Errorf("spend --account demo: %s", out)
	}
	for _, b := range []string{"burst-resume", "burst-suspend", "burst-sizer", "burst-agent", "burst-slurm-conf"} {
		for _, arg := range []string{"--version", "version"} {
			out, err := exec.Command(filepath.Join(binDir, b), arg).CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), b+" ") {
				t.Errorf("%s %s: %v %q", b, arg, err, out)
			}
		}
	}
}
