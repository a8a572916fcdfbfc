package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const example = "../../../examples/burst.yaml"

func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	err := App(&out).Run(append([]string{"burst-slurm-conf"}, args...))
	if err != nil {
		out.WriteString("ERR " + err.Error())
	}
	return out.String(), ExitCode(err)
}

func TestPrintInclude(t *testing.T) {
	out, code := run(t, "--config", example)
	if code != 0 || !strings.Contains(out, "NodeName=l4-[1-32]") || !strings.Contains(out, "ResumeProgram=/usr/local/bin/burst-resume") {
		t.Fatalf("code %d:\n%s", code, out)
	}
}

func TestOutWritesFiles(t *testing.T) {
	dir := t.TempDir()
	if out, code := run(t, "--config", example, "--out", dir); code != 0 {
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
	out, code := run(t, "--config", p)
	if code != 2 || !strings.Contains(out, `cluster.colour: unknown key`) || !strings.Contains(out, "classes[0].max_nodes") {
		t.Fatalf("code %d:\n%s", code, out)
	}
	if _, code := run(t, "--config", example, "stray"); code != 2 {
		t.Fatalf("stray argument: code %d", code)
	}
}

func TestCheckDrift(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "slurm.conf")
	os.WriteFile(conf, []byte("ClusterName=x\nSuspendTime=60\n"), 0o644)
	out, code := run(t, "check", "--config", example, "--slurm-conf", conf)
	if code != 1 || !strings.Contains(out, "SuspendTime=60, burst needs 3600") || !strings.Contains(out, "NodeName=l4-[1-32] (class l4) is not defined") {
		t.Fatalf("code %d:\n%s", code, out)
	}
	run(t, "--config", example, "--out", dir)
	os.WriteFile(conf, []byte("ClusterName=x\nInclude burst.conf\n"), 0o644)
	if out, code := run(t, "check", "--config", example, "--slurm-conf", conf); code != 0 {
		t.Fatalf("code %d:\n%s", code, out)
	}
}

func TestIAMPolicy(t *testing.T) {
	out, code := run(t, "iam-policy", "--config", example)
	var doc struct{ Statement []map[string]any }
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Statement) == 0 {
		t.Fatalf("code %d:\n%s", code, out)
	}
	if !strings.Contains(out, `"aws:RequestTag/burst:cluster": "ml-prod"`) {
		t.Fatalf("policy not scoped by the cluster tag:\n%s", out)
	}
}
