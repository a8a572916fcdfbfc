package e2e

import (
	"testing"

	"github.com/burst-hpc/burst/test/stack"
)

// versionBlind marks a test of a feature that does not depend on the Slurm
// release (capacity types, HA, the store): it runs once per backend, on
// 22.05 with the command line and on 26.05 through slurmrestd, and says so
// elsewhere. scripts/test-matrix.sh's REST_TESTS includes such tests so the
// 26.05+rest run reaches them. Features whose Slurm calls differ by release
// (power saving, requeue, drain, the REST data versions) never use it.
func versionBlind(t *testing.T) {
	t.Helper()
	v, err := harnessRelease()
	if err != nil {
		t.Fatal(err)
	}
	api, err := stack.SlurmAPIFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if (api == "cli" && v.Major == 22 && v.Minor == 5) || (api == "rest" && v.Major == 26 && v.Minor == 5) {
		return
	}
	t.Skipf("version-blind test: runs on Slurm 22.05 with the command line and on 26.05 through slurmrestd, not on %s with %s", v, api)
}
