package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/cmdline"
)

const example = "../examples/burst.yaml"

func runConf(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := run(append([]string{"burst-slurm-conf"}, args...), &out, &out)
	return out.String(), code
}

func TestPrintInclude(t *testing.T) {
	out, code := runConf(t, "--config", example)
	if code != 0 || !strings.Contains(out, "NodeName=l4-[1-32]") || !strings.Contains(out, "ResumeProgram=/usr/local/bin/burst-resume") {
		t.Fatalf("code %d:\n%s", code, out)
	}
}

func TestOutWritesFiles(t *testing.T) {
	dir := t.TempDir()
	if out, code := runConf(t, "--config", example, "--out", dir); code != 0 {
		t.Fatalf("code %d: %s", code, out)
	}
	for _, f := range []string{"burst.conf", "gres.conf", "cli_filter.lua"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestBadConfigExits2(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(p, []byte("cluster: {name: x, region: us-east-1, colour: red}\nclasses:\n  - name: a\n    max_nodes: -1\n"), 0o600)
	out, code := runConf(t, "--config", p)
	if code != 2 || !strings.Contains(out, `cluster.colour: unknown key`) || !strings.Contains(out, "classes[0].max_nodes") {
		t.Fatalf("code %d:\n%s", code, out)
	}
	if _, code := runConf(t, "--config", example, "stray"); code != 2 {
		t.Fatalf("stray argument: code %d", code)
	}
}

func TestCheckDrift(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "slurm.conf")
	os.WriteFile(conf, []byte("ClusterName=x\nSuspendTime=60\n"), 0o644)
	out, code := runConf(t, "check", "--config", example, "--slurm-conf", conf)
	if code != 1 || !strings.Contains(out, "SuspendTime=60, burst needs 3600") || !strings.Contains(out, "NodeName=l4-[1-32] (class l4) is not defined") {
		t.Fatalf("code %d:\n%s", code, out)
	}
	runConf(t, "--config", example, "--out", dir)
	os.WriteFile(conf, []byte("ClusterName=x\nInclude burst.conf\n"), 0o644)
	if out, code := runConf(t, "check", "--config", example, "--slurm-conf", conf); code != 0 {
		t.Fatalf("code %d:\n%s", code, out)
	}
}

func TestIAMPolicy(t *testing.T) {
	// --config before the subcommand is honoured as after it
	before, code := runConf(t, "--config", example, "iam-policy")
	if code != 0 || !strings.Contains(before, `"aws:RequestTag/burst:cluster": "ml-prod"`) {
		t.Fatalf("--config before iam-policy: code %d:\n%s", code, before)
	}
	out, code := runConf(t, "iam-policy", "--config", example)
	var doc struct{ Statement []map[string]any }
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Statement) == 0 {
		t.Fatalf("code %d:\n%s", code, out)
	}
	if !strings.Contains(out, `"aws:RequestTag/burst:cluster": "ml-prod"`) {
		t.Fatalf("policy not scoped by the cluster tag:\n%s", out)
	}
}

func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	if missing := cmdline.MissingEnvVars(App(io.Discard)); len(missing) > 0 {
		t.Fatalf("flags without an environment variable: %v", missing)
	}
}
