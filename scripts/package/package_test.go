package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func need(t *testing.T, tool, hint string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s is not installed and BURST_REQUIRE_TOOLS=1: %s (scripts/install-deps.sh)", tool, hint)
		}
		t.Skipf("SKIPPING: %s not installed (%s); set BURST_REQUIRE_TOOLS=1 to make this a failure", tool, hint)
	}
	return p
}

var progs = []string{"burst-resume", "burst-suspend", "burst-sizer", "burst-agent", "burst-slurm-conf"}

// TestPackagesContents builds both packages from stand-in binaries and
// generated files (the real ones come from `make package`) and lists them
// with dpkg-deb and rpm: the binaries, man pages, completions, the unit,
// sysusers and tmpfiles, and burst.yaml as a configuration file.
func TestPackagesContents(t *testing.T) {
	dir := t.TempDir()
	bin, gen, out := filepath.Join(dir, "bin"), filepath.Join(dir, "gen"), filepath.Join(dir, "out")
	for _, d := range []string{bin, gen + "/man", gen + "/bash", gen + "/zsh", gen + "/fish"} {
		os.MkdirAll(d, 0o755)
	}
	for _, p := range progs {
		os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\n"), 0o755)
		os.WriteFile(filepath.Join(gen, "man", p+".1.gz"), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(gen, "bash", p), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(gen, "zsh", "_"+p), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(gen, "fish", p+".fish"), []byte("x"), 0o644)
	}
	if err := os.Chdir("../.."); err != nil { // packaging/nfpm.yaml names files from the repository root
		t.Fatal(err)
	}
	defer os.Chdir("scripts/package")
	if err := run([]string{"-version", "v1.2.3-4-gabc1234", "-bin", bin, "-gen", gen, "-out", out}); err != nil {
		t.Fatal(err)
	}
	want := []string{"/etc/burst/burst.yaml", "/usr/lib/systemd/system/burst-sizer.service", "/usr/lib/sysusers.d/burst.conf",
		"/usr/lib/tmpfiles.d/burst.conf", "/usr/share/fish/vendor_completions.d/burst-sizer.fish"}
	for _, p := range progs {
		want = append(want, "/usr/bin/"+p, "/usr/share/man/man1/"+p+".1.gz", "/usr/share/bash-completion/completions/"+p)
	}
	deb := filepath.Join(out, "burst_1.2.3+git4.abc1234-1_amd64.deb")
	rpm := filepath.Join(out, "burst-1.2.3+git4.abc1234-1.x86_64.rpm")
	t.Run("deb", func(t *testing.T) {
		dpkg := need(t, "dpkg-deb", "apt-get install dpkg")
		list, err := exec.Command(dpkg, "-c", deb).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg-deb -c %s: %v\n%s", deb, err, list)
		}
		for _, w := range append(want, "/usr/share/zsh/vendor-completions/_burst-sizer") {
			if !strings.Contains(string(list), "."+w+"\n") {
				t.Errorf("the .deb lacks %s:\n%s", w, list)
			}
		}
		conf, err := exec.Command(dpkg, "-f", deb, "Version", "Depends").CombinedOutput()
		if err != nil || !strings.Contains(string(conf), "Version: 1.2.3+git4.abc1234-1") || !strings.Contains(string(conf), "libc6") {
			t.Errorf("control fields %q (%v)", conf, err)
		}
		ctl := t.TempDir()
		if o, err := exec.Command(dpkg, "-e", deb, ctl).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, o)
		}
		cf, _ := os.ReadFile(filepath.Join(ctl, "conffiles"))
		if strings.TrimSpace(string(cf)) != "/etc/burst/burst.yaml" {
			t.Errorf("conffiles %q: want /etc/burst/burst.yaml (an upgrade keeps the admin's)", cf)
		}
	})
	t.Run("rpm", func(t *testing.T) {
		rpmq := need(t, "rpm", "apt-get install rpm")
		list, err := exec.Command(rpmq, "-qpl", rpm).CombinedOutput()
		if err != nil {
			t.Fatalf("rpm -qpl %s: %v\n%s", rpm, err, list)
		}
		for _, w := range append(want, "/usr/share/zsh/site-functions/_burst-sizer") {
			if !strings.Contains(string(list), w+"\n") {
				t.Errorf("the .rpm lacks %s:\n%s", w, list)
			}
		}
		// c: %config, n: noreplace (an upgrade keeps the admin's file)
		cfg, err := exec.Command(rpmq, "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", rpm).CombinedOutput()
		var flagged []string
		for _, l := range strings.Split(string(cfg), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				flagged = append(flagged, l)
			}
		}
		if err != nil || len(flagged) != 1 || flagged[0] != "/etc/burst/burst.yaml cn" {
			t.Errorf("rpm files with flags: %q (%v): want only /etc/burst/burst.yaml as %%config(noreplace)", flagged, err)
		}
		v, err := exec.Command(rpmq, "-qp", "--qf", "%{VERSION}-%{RELEASE} %{REQUIRENAME}", rpm).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(v), "1.2.3+git4.abc1234-1 ") {
			t.Errorf("rpm version: %q (%v)", v, err)
		}
	})
}

// TestUnitHardened checks the sizer's unit with systemd-analyze: it
// verifies, and its exposure stays "OK" (below 2.0).
func TestUnitHardened(t *testing.T) {
	sa := need(t, "systemd-analyze", "apt-get install systemd")
	b, err := os.ReadFile("../../packaging/burst-sizer.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"User=burst", "ProtectSystem=strict", "ProtectHome=yes", "NoNewPrivileges=yes", "PrivateTmp=yes",
		"StateDirectory=burst", "RuntimeDirectory=burst", "CapabilityBoundingSet=\n"} {
		if !strings.Contains(string(b), k) {
			t.Errorf("burst-sizer.service lacks %q", k)
		}
	}
	// the binary and its man page are not installed here: verify the rest
	unit := strings.NewReplacer("/usr/bin/burst-sizer", "/bin/true", "Documentation=man:burst-sizer(1)\n", "").Replace(string(b))
	p := filepath.Join(t.TempDir(), "burst-sizer.service")
	os.WriteFile(p, []byte(unit), 0o644)
	if o, err := exec.Command(sa, "verify", p).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, o)
	}
	o, err := exec.Command(sa, "security", "--offline=yes", "--threshold=20", p).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 (%v):\n%s", err, o)
	}
	t.Logf("%s", o[max(0, len(o)-200):])
}
