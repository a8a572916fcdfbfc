// Package configtest gives tests the embedded demo burst.yaml, validated,
// with every path (log, state, token, FSx stand-in) in a fresh temporary
// directory and Slurm's commands in an empty one, so that nothing a test
// runs reaches a real Slurm or writes outside its own directory.
package configtest

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/burst-hpc/burst/internal/config"
)

var casMu sync.Mutex

// Demo is the demo configuration rooted in a new temporary directory
// (removed when the test ends), with a test CA at sizer.tls.ca_file (see
// Server for an HTTPS stand-in sizer that chains to it). Its path is plain (no test name, which may
// hold characters user data refuses in a path).
func Demo(t testing.TB) *config.Config {
	t.Helper()
	dir, derr := os.MkdirTemp("", "burst-test-")
	if derr != nil {
		t.Fatal(derr)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg, err := config.Parse([]byte(strings.ReplaceAll(string(config.DemoYAML), "/tmp/burst-demo", dir)), filepath.Join(dir, "burst.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Slurm.BinDir = filepath.Join(dir, "no-slurm")
	cfg.Slurm.ConfDir = dir
	if err := os.MkdirAll(cfg.Slurm.BinDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ca := WriteCA(t, cfg.Sizer.TLS.CAFile)
	casMu.Lock()
	cas[string(ca.PEM)] = ca
	casMu.Unlock()
	return cfg
}

// Write writes cfg to cfg.Source (a burst.yaml the programs load) and
// returns that path.
func Write(t testing.TB, cfg *config.Config) string {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.Source, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg.Source
}

// RunProgram runs a program's run(args, env, stdout, stderr) as prog with
// args and returns its exit status and its output (standard output and
// error together, in order). Unless env names one,
// $BURST_LOG_FILE points into the test's directory, so that a failure to
// start is not logged in /var/log.
func RunProgram(t testing.TB, run func(args, env []string, stdout, stderr io.Writer) int, prog string, env []string, args ...string) (int, string) {
	t.Helper()
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "BURST_LOG_FILE=") }) {
		env = append(env, "BURST_LOG_FILE="+filepath.Join(t.TempDir(), "startup.log"))
	}
	var out strings.Builder
	code := run(append([]string{prog}, args...), env, &out, &out)
	return code, out.String()
}
