// Package packer_test checks the node image template and its provisioner
// scripts with the real tools: packer fmt -check, packer validate (offline,
// dummy variable values), shellcheck, and a negative test that breaks the
// template on purpose. Without packer or shellcheck the tests skip loudly,
// or fail when BURST_REQUIRE_TOOLS=1 (CI and `make test` set it).
package packer_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/bootstrap"
)

const template = "burst-node.pkr.hcl"

func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s is not installed and BURST_REQUIRE_TOOLS=1: install it (apt-get install %s, or make deps)", name, name)
		}
		t.Skipf("SKIPPING: %s not installed (apt-get install %s); set BURST_REQUIRE_TOOLS=1 to make this a failure", name, name)
	}
	return p
}

func run(t *testing.T, dir string, prog string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = dir
	// Offline and credential-free: validate must not need AWS.
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1", "PACKER_NO_COLOR=1", "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_PROFILE=")
	return cmd.CombinedOutput()
}

// validateArgs gives the required variables dummy values.
func validateArgs(t *testing.T) []string {
	agent := filepath.Join(t.TempDir(), "burst-agent")
	if err := os.WriteFile(agent, []byte("\x7fELF dummy"), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"validate",
		"-var", "slurm_version=22.05.8",
		"-var", "slurm_sha256=0000000000000000000000000000000000000000000000000000000000000000",
		"-var", "cuda_keyring_sha256=0000000000000000000000000000000000000000000000000000000000000000",
		"-var", "fsx_key_sha256=0000000000000000000000000000000000000000000000000000000000000000",
		"-var", "efa_installer_sha256=0000000000000000000000000000000000000000000000000000000000000000",
		"-var", "ofi_nccl_sha256=0000000000000000000000000000000000000000000000000000000000000000",
		"-var", "burst_version=v0.0.0-test",
		"-var", "burst_agent_binary=" + agent,
		template}
}

func TestPackerFmt(t *testing.T) {
	packer := tool(t, "packer")
	out, err := run(t, ".", packer, "fmt", "-check", "-diff", template)
	if err != nil {
		t.Fatalf("packer fmt -check %s: %v (run `packer fmt packer/` to fix)\n%s", template, err, out)
	}
}

func TestPackerValidate(t *testing.T) {
	packer := tool(t, "packer")
	out, err := run(t, ".", packer, validateArgs(t)...)
	if err != nil {
		t.Fatalf("packer validate: %v\n%s", err, out)
	}
}

// copyTree copies the template, scripts and files to a temp dir so a test can
// break the copy.
func copyTree(t *testing.T) string {
	dst := t.TempDir()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, p), 0o755)
		}
		if strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, p), data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestValidateCatchesBreakage breaks copies of the template on purpose and
// checks packer validate fails, naming the problem.
func TestValidateCatchesBreakage(t *testing.T) {
	packer := tool(t, "packer")
	orig, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mutate func(dir string, tpl string) string
		args   func([]string) []string
		want   string
	}{
		{
			name: "unknown variable reference",
			mutate: func(_ string, tpl string) string {
				return mustReplace(t, tpl, `ami_description             = "burst GPU node:`, `ami_description             = "${var.no_such_variable} burst GPU node:`)
			},
			want: "no_such_variable",
		},
		{
			name: "missing provisioner script",
			mutate: func(dir string, tpl string) string {
				os.Remove(filepath.Join(dir, "scripts", "30-lustre.sh"))
				return tpl
			},
			want: "30-lustre.sh",
		},
		{
			name:   "required variable unset",
			mutate: func(_ string, tpl string) string { return tpl },
			args: func(a []string) []string {
				var out []string
				for i := 0; i < len(a); i++ {
					if a[i] == "-var" && strings.HasPrefix(a[i+1], "slurm_version=") {
						i++
						continue
					}
					out = append(out, a[i])
				}
				return out
			},
			want: `Unset variable "slurm_version"`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyTree(t)
			tpl := c.mutate(dir, string(orig))
			if err := os.WriteFile(filepath.Join(dir, template), []byte(tpl), 0o644); err != nil {
				t.Fatal(err)
			}
			args := validateArgs(t)
			if c.args != nil {
				args = c.args(args)
			}
			out, err := run(t, dir, packer, args...)
			if err == nil {
				t.Fatalf("packer validate accepted the broken template:\n%s", out)
			}
			if !bytes.Contains(out, []byte(c.want)) {
				t.Fatalf("packer validate failed without naming %q:\n%s", c.want, out)
			}
			t.Logf("packer validate rejected it: %s", firstLine(out, c.want))
		})
	}
	// Control: the untouched copy validates, so the failures above come from the breakage.
	dir := copyTree(t)
	if out, err := run(t, dir, packer, validateArgs(t)...); err != nil {
		t.Fatalf("untouched copy does not validate: %v\n%s", err, out)
	}
}

func mustReplace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("template no longer contains %q; update the test", old)
	}
	return strings.Replace(s, old, new, 1)
}

// shellScripts lists every shell script under packer/ (by extension or shebang).
func shellScripts(t *testing.T) []string {
	var out []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".sh") || bytes.HasPrefix(data, []byte("#!/bin/sh")) || bytes.HasPrefix(data, []byte("#!/bin/bash")) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestShellcheck(t *testing.T) {
	sc := tool(t, "shellcheck")
	scripts := shellScripts(t)
	if len(scripts) < 7 {
		t.Fatalf("found only %d shell scripts: %q", len(scripts), scripts)
	}
	for _, s := range scripts {
		out, err := run(t, ".", sc, "--severity=style", s)
		if err != nil {
			t.Errorf("shellcheck %s: %v\n%s", s, err, out)
		}
		info, err := os.Stat(s)
		if err != nil || info.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable", s)
		}
	}
}

// TestProvisionerOrder checks the template runs every script in scripts/,
// each once, in file-name order, and that each script stops on errors.
func TestProvisionerOrder(t *testing.T) {
	tpl, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`scripts/([0-9]{2}-[a-z]+\.sh)`).FindAllStringSubmatch(string(tpl), -1)
	var inTemplate []string
	for _, m := range used {
		inTemplate = append(inTemplate, m[1])
	}
	entries, err := os.ReadDir("scripts")
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, e := range entries {
		onDisk = append(onDisk, e.Name())
	}
	sort.Strings(onDisk)
	if strings.Join(inTemplate, " ") != strings.Join(onDisk, " ") {
		t.Fatalf("template runs %q, scripts/ has %q (every script once, in name order)", inTemplate, onDisk)
	}
	want := []string{"10-os.sh", "20-nvidia.sh", "30-lustre.sh", "35-efa.sh", "40-slurm.sh", "50-burst.sh", "90-validate.sh", "95-seal.sh"}
	if strings.Join(onDisk, " ") != strings.Join(want, " ") {
		t.Fatalf("scripts/ has %q, want %q", onDisk, want)
	}
	for _, s := range onDisk {
		data, _ := os.ReadFile(filepath.Join("scripts", s))
		if !regexp.MustCompile(`(?m)^set -[a-z]*u[a-z]*o pipefail$`).Match(data) {
			t.Errorf("%s: no `set -euo pipefail` (or -uo for 90-validate.sh)", s)
		}
		if s != "90-validate.sh" && !bytes.Contains(data, []byte("set -euo pipefail")) {
			t.Errorf("%s: must stop on the first error (set -euo pipefail)", s)
		}
	}
	// Every file the scripts install is shipped in files/.
	for _, f := range regexp.MustCompile(`\$files/([A-Za-z0-9._-]+)`).FindAllSubmatch(mustReadAll(t, "scripts"), -1) {
		name := string(f[1])
		if name == "burst-agent" { // uploaded from var.burst_agent_binary
			continue
		}
		if _, err := os.Stat(filepath.Join("files", name)); err != nil {
			t.Errorf("a script installs files/%s, which does not exist", name)
		}
	}
}

func mustReadAll(t *testing.T, dir string) []byte {
	var all []byte
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data...)
	}
	return all
}

func firstLine(out []byte, sub string) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// TestIMDSFirewallMatchesBootstrap: the image's early-boot IMDS firewall
// is the bootstrap's own table for EC2's metadata addresses, and slurmd
// and the bootstrap cannot start without it.
func TestIMDSFirewallMatchesBootstrap(t *testing.T) {
	eps, err := bootstrap.FirewallEndpoints()
	if err != nil {
		t.Fatal(err)
	}
	strip := func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	image := string(mustRead(t, "files/imds-firewall.nft"))
	if strip(image) != strip(bootstrap.FirewallRules(eps)) {
		t.Errorf("files/imds-firewall.nft differs from the bootstrap's rules:\n%s\nwant:\n%s", strip(image), strip(bootstrap.FirewallRules(eps)))
	}
	for unit, want := range map[string]string{
		"files/slurmd.service":          "Requires=munge.service burst-imds-firewall.service",
		"files/burst-bootstrap.service": "Requires=burst-imds-firewall.service",
	} {
		if !strings.Contains(string(mustRead(t, unit)), want) {
			t.Errorf("%s lacks %q", unit, want)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEveryDownloadIsChecksummed: each file a script fetches (curl -o) is
// checked with sha256sum -c against a template variable before it is
// used; nothing is piped from the network into a command.
func TestEveryDownloadIsChecksummed(t *testing.T) {
	entries, err := os.ReadDir("scripts")
	if err != nil {
		t.Fatal(err)
	}
	curlOut := regexp.MustCompile(`curl [^\n]*-o "?([^ "\n]+)"?`)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("scripts", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		src := strings.ReplaceAll(string(data), "\\\n", " ")
		for _, line := range strings.Split(src, "\n") {
			if !regexp.MustCompile(`(^\s*|[;&|(]\s*|if !?\s*)curl `).MatchString(line) {
				continue
			}
			m := curlOut.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("%s: a download that is not saved to a file to be checked: %s", e.Name(), strings.TrimSpace(line))
				continue
			}
			if !regexp.MustCompile(`\$[A-Z0-9_]+_SHA256  "?` + regexp.QuoteMeta(m[1]) + `"?" \| sha256sum -c`).MatchString(src) {
				t.Errorf("%s: %s is downloaded but never checked with sha256sum -c against a *_SHA256 variable", e.Name(), m[1])
			}
		}
	}
}

// TestImageIsSealed: the last provisioner removes every authorized SSH key
// (and fails when one remains), and the image masks nftables.service,
// whose start or reload would flush the IMDS firewall.
func TestImageIsSealed(t *testing.T) {
	tpl, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`scripts/([0-9]{2}-[a-z]+\.sh)`).FindAllStringSubmatch(string(tpl), -1)
	if len(used) == 0 || used[len(used)-1][1] != "95-seal.sh" {
		t.Fatalf("the last provisioner script is %v, want 95-seal.sh", used[len(used)-1:])
	}
	seal := string(mustRead(t, "scripts/95-seal.sh"))
	for _, want := range []string{"-name authorized_keys", "rm -f -- \"$f\"", "an authorized keys file remains"} {
		if !strings.Contains(seal, want) {
			t.Errorf("95-seal.sh lacks %q", want)
		}
	}
	if !strings.Contains(string(mustRead(t, "scripts/10-os.sh")), "systemctl mask nftables.service") {
		t.Error("10-os.sh does not mask nftables.service")
	}
	if !strings.Contains(string(mustRead(t, "scripts/90-validate.sh")), "is-enabled nftables.service") {
		t.Error("90-validate.sh does not check nftables.service is masked")
	}
}
