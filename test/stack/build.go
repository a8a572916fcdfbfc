package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Binaries returns a directory holding burst's binaries: $BURST_BIN when
// set (make test builds them once), else a fresh build into a temporary
// directory (removed by the returned cleanup).
func Binaries() (dir string, cleanup func(), err error) {
	if d := os.Getenv("BURST_BIN"); d != "" {
		return d, func() {}, nil
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	dir, err = os.MkdirTemp("", "burst-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	// MkdirTemp makes it 0700: the TaskProlog (burst-agent) and the
	// cli_filter (burst-sizer route) run as the job's ordinary user, who must
	// reach it (else every user's job fails, 126), as BURST_BIN's allows
	if err := os.Chmod(dir, 0o755); err != nil {
		cleanup()
		return "", nil, err
	}
	for _, c := range []string{"resume", "suspend", "sizer", "agent", "slurm-conf"} {
		if _, err := os.Stat(filepath.Join(root, c, "main.go")); err != nil {
			continue
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "burst-"+c), "./"+c)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			cleanup()
			return "", nil, fmt.Errorf("building burst-%s: %v\n%s", c, err, out)
		}
	}
	return dir, cleanup, nil
}
