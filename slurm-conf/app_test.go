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
	"github.com/burst-hpc/burst/internal/cmdline/cmdlinetest"
	"github.com/burst-hpc/burst/internal/version"
)

const example = "../examples/burst.yaml"

func runConf(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := run(append([]string{"burst-slurm-conf"}, args...), &out, &out)
	return out.String(), code
}

func TestPrintInclude(t *testing.T) {
	out, code := runConf(t, "--config", example, "--slurm-version", "24.11")
	if code != 0 || !strings.Contains(out, "NodeName=l4-[1-32]") || !strings.Contains(out, "ResumeProgram=/usr/local/bin/burst-resume") {
		t.Fatalf("code %d:\n%s", code, out)
	}
}

func TestOutWritesFiles(t *testing.T) {
	dir := t.TempDir()
	if out, code := runConf(t, "--config", example, "--slurm-version", "24.11", "--out", dir); code != 0 {
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
	out, code := runConf(t, "check", "--config", example, "--slurm-version", "22.05", "--slurm-conf", conf)
	if code != cmdline.ExitDrift || !strings.Contains(out, "SuspendTime=60, burst needs 3600") || !strings.Contains(out, "NodeName=l4-[1-32] (class l4) is not defined") {
		t.Fatalf("code %d:\n%s", code, out)
	}
	// an unreadable slurm.conf is a failure (1), not drift
	if _, code := runConf(t, "check", "--config", example, "--slurm-version", "22.05", "--slurm-conf", filepath.Join(dir, "none.conf")); code != 1 {
		t.Errorf("missing slurm.conf: code %d, want 1", code)
	}
	runConf(t, "--config", example, "--slurm-version", "22.05", "--out", dir)
	os.WriteFile(conf, []byte("ClusterName=x\nInclude burst.conf\n"), 0o644)
	if out, code := runConf(t, "check", "--config", example, "--slurm-version", "22.05", "--slurm-conf", conf); code != 0 {
		t.Fatalf("code %d:\n%s", code, out)
	}
}

// TestSlurmVersion: the release comes from --slurm-version, else
// slurm.version, else `<bin_dir>/scontrol --version`; what is written
// follows it, and without any of them the error says how to fix it.
func TestSlurmVersion(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	yaml, _ := os.ReadFile(example)
	withBin := func(extra string) string {
		p := filepath.Join(dir, "burst.yaml")
		s := strings.Replace(string(yaml), "  bin_dir: /usr/bin ", "  bin_dir: "+bin+extra+" ", 1)
		if s == string(yaml) {
			t.Fatal("examples/burst.yaml has no 'bin_dir: /usr/bin' line to replace")
		}
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	cfg := withBin("")
	// no scontrol there
	out, code := runConf(t, "--config", cfg)
	if code == 0 || !strings.Contains(out, "slurm.version") || !strings.Contains(out, "--slurm-version") {
		t.Fatalf("no version anywhere: code %d, want an error naming slurm.version and --slurm-version:\n%s", code, out)
	}
	os.WriteFile(filepath.Join(bin, "scontrol"), []byte("#!/bin/sh\n[ \"$1\" = --version ] && echo 'slurm-wlm 22.05.8'\n"), 0o755)
	out, code = runConf(t, "--config", cfg)
	if code != 0 || !strings.Contains(out, "for Slurm 22.05") || !strings.Contains(out, "cloud_reg_addrs") {
		t.Fatalf("detected 22.05: code %d, want a 22.05 include with cloud_reg_addrs:\n%s", code, out)
	}
	out, code = runConf(t, "--config", cfg, "--slurm-version", "26.05")
	if code != 0 || !strings.Contains(out, "for Slurm 26.05") || strings.Contains(out, "cloud_reg_addrs") {
		t.Fatalf("--slurm-version 26.05: code %d, want a 26.05 include without cloud_reg_addrs:\n%s", code, out)
	}
	cfg = withBin("\n  version: \"24.11\"\n ")
	out, code = runConf(t, "--config", cfg)
	if code != 0 || !strings.Contains(out, "for Slurm 24.11") {
		t.Fatalf("slurm.version 24.11: code %d:\n%s", code, out)
	}
	if out, code = runConf(t, "--config", cfg, "--slurm-version", "21.08"); code != 2 && code != 1 || !strings.Contains(out, "older than 22.05") {
		t.Fatalf("--slurm-version 21.08: code %d, want a refusal:\n%s", code, out)
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
	// the example names an interruption queue: its reader gets the two SQS
	// actions on that queue alone
	if !strings.Contains(out, `"arn:aws:sqs:us-east-1:123456789012:burst-ml-prod-interruptions"`) || !strings.Contains(out, `"sqs:ReceiveMessage"`) ||
		strings.Count(out, `"sqs:`) != 2 {
		t.Fatalf("policy lacks the interruption queue statement:\n%s", out)
	}
}

func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	if missing := cmdlinetest.MissingEnvVars(App(io.Discard)); len(missing) > 0 {
		t.Fatalf("flags without an environment variable: %v", missing)
	}
}

// TestIAMPolicyNodeOnExample: the README's command works on the example
// as written (its munge_key_source is a Secrets Manager ARN).
func TestIAMPolicyNodeOnExample(t *testing.T) {
	out, code := runConf(t, "-c", example, "iam-policy", "--node")
	if code != 0 || !strings.Contains(out, `"secretsmanager:GetSecretValue"`) || !strings.Contains(out, "arn:aws:secretsmanager:us-east-1:123456789012:secret:burst/munge-key-AbCdEf") {
		t.Fatalf("iam-policy --node on the example: code %d:\n%s", code, out)
	}
}

// TestVersion: --version and the version subcommand print the stamped
// release; version takes no arguments.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, code := runConf(t, args...)
		if code != 0 || !strings.HasPrefix(out, "burst-slurm-conf "+version.Version+" (") {
			t.Errorf("%v: code %d: %q", args, code, out)
		}
	}
	if _, code := runConf(t, "version", "extra"); code != 2 {
		t.Errorf("version extra: code %d, want 2", code)
	}
}

// TestOutAllOrNothing: --out refuses a directory that does not exist (it
// never creates a mistyped one), and a write that fails part-way leaves
// every old file as it was and no temporary behind.
func TestOutAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "etc", "slurmm")
	if out, code := runConf(t, "--config", example, "--slurm-version", "24.11", "--out", missing); code != 2 || !strings.Contains(out, "no such directory") {
		t.Errorf("missing --out dir: code %d: %s", code, out)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("--out created the missing directory")
	}
	os.WriteFile(filepath.Join(dir, "burst.conf"), []byte("old\n"), 0o644)
	// gres.conf cannot be renamed into place: a directory holds its name
	os.Mkdir(filepath.Join(dir, "gres.conf"), 0o755)
	os.WriteFile(filepath.Join(dir, "gres.conf", "x"), nil, 0o644)
	if out, code := runConf(t, "--config", example, "--slurm-version", "24.11", "--out", dir); code == 0 {
		t.Fatalf("--out with gres.conf blocked: code 0: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "burst.conf")); string(b) != "old\n" {
		t.Errorf("burst.conf changed by a failed --out: %q", b)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary left behind: %s", e.Name())
		}
	}
}

// TestDocumentedCommandsExist: every `burst-slurm-conf ...` command line in
// the README and docs names subcommands and flags the program has.
func TestDocumentedCommandsExist(t *testing.T) {
	paths, _ := filepath.Glob("../docs/*.md")
	paths = append(paths, "../README.md", "../sizer/README.md")
	n := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, words := range cmdlinetest.DocCommands(string(b), "burst-slurm-conf") {
			n++
			if err := cmdlinetest.CheckDocCommand(App(io.Discard), words); err != nil {
				t.Errorf("%s: `burst-slurm-conf %s`: %v", p, strings.Join(words, " "), err)
			}
		}
	}
	if n < 3 {
		t.Errorf("found only %d burst-slurm-conf commands in the docs; is the extraction broken?", n)
	}
}
