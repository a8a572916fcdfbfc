package harness

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// The Slurm versions the harness runs, each from Debian's packages: 22.05 is
// the host's own (Debian 12), the others come from Debian roots that
// scripts/slurm-roots.sh builds (make deps).
var SlurmVersions = []string{"22.05", "24.11", "26.05"}

// DefaultSlurmVersion is what runs when BURST_SLURM is unset.
const DefaultSlurmVersion = "22.05"

// suites maps a Slurm version to the Debian suite that ships it; "" is the host.
var suites = map[string]string{"22.05": "", "24.11": "trixie", "26.05": "sid"}

// Slurm is one installation of Slurm: the host's packages (Root "/") or a
// Debian root. Paths such as Options.SbinDir are paths inside it.
type Slurm struct {
	Version string // as selected: "22.05", "24.11", "26.05"
	Release string // what slurmctld -V says, e.g. "24.11.5"
	Suite   string // Debian suite of a root ("trixie", "sid"); "" for the host
	Root    string // "/" for the host, else the root directory (symlinks resolved)
}

// Host reports whether this is the host's own Slurm.
func (s Slurm) Host() bool { return s.Root == "/" || s.Root == "" }

// Path is the host path of file p (absolute, as seen inside the installation).
func (s Slurm) Path(p string) string {
	if s.Host() {
		return p
	}
	return filepath.Join(s.Root, p)
}

// String names the version and where it comes from, for test logs:
// "slurm 24.11.5 from /var/cache/burst/slurm-roots/trixie-...".
func (s Slurm) String() string {
	if s.Host() {
		return fmt.Sprintf("slurm %s from the host's packages", s.Release)
	}
	return fmt.Sprintf("slurm %s from %s (Debian %s)", s.Release, s.Root, s.Suite)
}

// RestPlugin is the slurmrestd OpenAPI plugin the harness loads and
// RestVersion the data version its paths carry (/slurm/<RestVersion>/ping):
// 22.05 has openapi/v0.0.38; from 23.11 one openapi/slurmctld plugin serves
// the data parsers the release ships, newest last.
func (s Slurm) RestPlugin() string {
	if s.Version == "22.05" {
		return "openapi/v0.0.38"
	}
	return "openapi/slurmctld"
}

// RestVersion: see RestPlugin.
func (s Slurm) RestVersion() string {
	switch s.Version {
	case "22.05":
		return "v0.0.38"
	case "24.11":
		return "v0.0.42"
	default:
		return "v0.0.45"
	}
}

// RootsDir is where scripts/slurm-roots.sh keeps the roots
// ($BURST_SLURM_ROOTS, default /var/cache/burst/slurm-roots).
func RootsDir() string {
	return cmp.Or(os.Getenv("BURST_SLURM_ROOTS"), "/var/cache/burst/slurm-roots")
}

// SelectedSlurm is the installation BURST_SLURM names (default 22.05).
func SelectedSlurm() (Slurm, error) {
	return LookupSlurm(cmp.Or(os.Getenv("BURST_SLURM"), DefaultSlurmVersion))
}

var hostRelease = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("/usr/sbin/slurmctld", "-V").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("running the host's /usr/sbin/slurmctld -V: %v: %s (install the Debian packages slurmctld slurmd slurm-client munge slurmrestd: make deps)", err, strings.TrimSpace(string(out)))
	}
	f := strings.Fields(string(out))
	return f[len(f)-1], nil
})

// LookupSlurm finds the installation of a Slurm version. It fails, saying
// how to fix it, when the version is unknown, its root is not built, or the
// root holds another release than the version names.
func LookupSlurm(version string) (Slurm, error) {
	suite, ok := suites[version]
	if !ok {
		return Slurm{}, fmt.Errorf("BURST_SLURM=%q: unknown Slurm version; the harness runs %s", version, strings.Join(SlurmVersions, ", "))
	}
	if suite == "" {
		rel, err := hostRelease()
		if err != nil {
			return Slurm{}, err
		}
		if !strings.HasPrefix(rel, version+".") {
			return Slurm{}, fmt.Errorf("Slurm %s runs from the host's packages, but the host's slurmctld is %s (Debian 12 ships 22.05)", version, rel)
		}
		return Slurm{Version: version, Release: rel, Root: "/"}, nil
	}
	build := fmt.Sprintf("build it with `make deps` or `scripts/slurm-roots.sh %s` (as root)", version)
	root, err := rootOf(version, suite)
	if err != nil {
		return Slurm{}, err
	}
	stamp, err := readStamp(filepath.Join(root, ".burst-root"))
	if err != nil {
		return Slurm{}, fmt.Errorf("Slurm %s: root %s is incomplete (%v): %s", version, root, err, build)
	}
	rel := stamp["SLURM_RELEASE"]
	if !strings.HasPrefix(rel, version+".") {
		return Slurm{}, fmt.Errorf("Slurm %s: the Debian %s root %s holds Slurm %q, not %s.x (the suite moved on?); the harness's version table (test/harness/slurm.go) needs updating", version, suite, root, rel, version)
	}
	if _, err := os.Stat(filepath.Join(root, "usr/sbin/slurmctld")); err != nil {
		return Slurm{}, fmt.Errorf("Slurm %s: root %s has no slurmctld (%v): %s", version, root, err, build)
	}
	return Slurm{Version: version, Release: rel, Suite: suite, Root: root}, nil
}

// rootOf finds the root of version: the one scripts/slurm-roots.sh built
// for this tree's recipe (its package list), asked with --print-root; when
// the script is not beside this source (a binary built elsewhere), the
// suite's root built last.
func rootOf(version, suite string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "slurm-roots.sh")
	if _, err := os.Stat(script); err == nil {
		var stderr strings.Builder
		cmd := exec.Command(script, "--print-root", version)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("%s (%v)", strings.TrimPrefix(strings.TrimSpace(stderr.String()), "slurm-roots: FAIL: "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	link := filepath.Join(RootsDir(), suite)
	root, err := filepath.EvalSymlinks(link)
	if err != nil {
		return "", fmt.Errorf("Slurm %s: no Debian %s root at %s (%v): build it with `make deps` or `scripts/slurm-roots.sh %s` (as root)", version, suite, link, err, version)
	}
	return root, nil
}

// readStamp reads the KEY=VALUE lines scripts/slurm-roots.sh writes into /.burst-root.
func readStamp(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			m[k] = v
		}
	}
	return m, sc.Err()
}
