package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// debianRoot is the cached Debian 13 root scripts/slurm-roots.sh builds
// (make deps), used read-only under an overlay: a clean Debian per run.
func debianRoot(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("BURST_SLURM_ROOTS")
	if cache == "" {
		cache = "/var/cache/burst/slurm-roots"
	}
	root := filepath.Join(cache, "trixie")
	_, err := os.Stat(filepath.Join(root, "usr", "bin", "dpkg"))
	if os.Geteuid() != 0 || err != nil {
		if os.Getenv("BURST_REQUIRE_SLURM") == "1" {
			t.Fatalf("installing the .deb needs root and the Debian 13 root %s (make deps): euid %d, %v", root, os.Geteuid(), err)
		}
		t.Skipf("SKIPPING: needs root and the Debian 13 root %s (make deps); BURST_REQUIRE_SLURM=1 makes this a failure", root)
	}
	return root
}

// stage writes stand-in binaries that print version, and generated files.
func stage(t *testing.T, dir, version string) (bin, gen string) {
	bin, gen = filepath.Join(dir, "bin"), filepath.Join(dir, "gen")
	for _, d := range []string{bin, gen + "/man", gen + "/bash", gen + "/zsh", gen + "/fish"} {
		os.MkdirAll(d, 0o755)
	}
	for _, p := range progs {
		os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\necho "+p+" "+version+"\n"), 0o755)
		os.WriteFile(filepath.Join(gen, "man", p+".1.gz"), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(gen, "bash", p), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(gen, "zsh", "_"+p), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(gen, "fish", p+".fish"), []byte("x"), 0o644)
	}
	return bin, gen
}

// the steps inside the clean root: install 1.0.0, as an admin would edit
// burst.yaml and the sizer would leave state, upgrade to 1.1.0, remove
const inRoot = `set -e
dpkg -i /pkgs/burst_1.0.0-1_amd64.deb
test "$(burst-sizer)" = "burst-sizer v1.0.0"
getent passwd burst
grep -q "^  burst_bin: /usr/bin " /etc/burst/burst.yaml
test "$(stat -c %U:%G:%a /var/lib/burst)" = burst:burst:770
test "$(stat -c %G:%a /var/log/burst)" = burst:770
if getent passwd slurm >/dev/null; then id -nG slurm | grep -qw burst; fi
echo "# the admin's edit" >> /etc/burst/burst.yaml
echo ledger > /var/lib/burst/sizer.db
dpkg -i /pkgs/burst_1.1.0-1_amd64.deb
test "$(burst-sizer)" = "burst-sizer v1.1.0"
grep -q "the admin's edit" /etc/burst/burst.yaml
test "$(cat /var/lib/burst/sizer.db)" = ledger
dpkg -r burst
test ! -e /usr/bin/burst-sizer
grep -q "the admin's edit" /etc/burst/burst.yaml
test "$(cat /var/lib/burst/sizer.db)" = ledger
echo install-upgrade-remove-ok
`

// TestDebInstallUpgrade installs the .deb into a clean Debian 13 (an
// overlay over the cached root, in a private mount namespace), upgrades
// it to a newer one keeping a modified burst.yaml and the state directory,
// and removes it (config and state stay).
func TestDebInstallUpgrade(t *testing.T) {
	root := debianRoot(t)
	work := t.TempDir()
	pkgs := filepath.Join(work, "pkgs")
	wd, _ := os.Getwd()
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	for _, v := range []string{"v1.0.0", "v1.1.0"} {
		bin, gen := stage(t, filepath.Join(work, v), v)
		if err := run([]string{"-version", v, "-bin", bin, "-gen", gen, "-out", pkgs, "-formats", "deb"}); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(work, "steps.sh"), []byte(inRoot), 0o755)
	m := filepath.Join(work, "mnt")
	os.MkdirAll(m, 0o755)
	script := fmt.Sprintf(`set -e
mount -t tmpfs tmpfs %[1]s
mkdir %[1]s/upper %[1]s/work %[1]s/root
mount -t overlay overlay -o lowerdir=%[2]s,upperdir=%[1]s/upper,workdir=%[1]s/work %[1]s/root
mkdir -p %[1]s/root/pkgs %[1]s/root/steps
mount --bind %[3]s %[1]s/root/pkgs
mount --bind %[4]s %[1]s/root/steps
mount -t proc proc %[1]s/root/proc
exec chroot %[1]s/root /bin/sh /steps/steps.sh
`, m, root, pkgs, work)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "install-upgrade-remove-ok") {
		t.Fatalf("install, upgrade, remove in a clean Debian 13: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
