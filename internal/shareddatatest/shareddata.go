// Package shareddatatest finds, for tests, the public reference data sets the
// project is developed against (traces, the instance catalog, spot
// advisor and preemption records): ../shared/data beside the clone, as CI
// checks it out, or $BURST_SHARED_DATA. A test that needs a file calls
// Require: without the file it skips, loudly, on a plain clone, and fails
// under BURST_REQUIRE_DATA=1, which `make test` sets.
package shareddatatest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// EnvDir overrides where the data is; EnvRequire=1 turns a missing file
// into a failure.
const (
	EnvDir     = "BURST_SHARED_DATA"
	EnvRequire = "BURST_REQUIRE_DATA"
)

// Dir is $BURST_SHARED_DATA, else shared/data beside the module's root
// (the directory above the nearest go.mod up from the working directory).
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the shared data: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(d), "shared", "data"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("finding the shared data: no go.mod above %s (set $%s)", wd, EnvDir)
		}
	}
}

// Require returns the path of rel (e.g. "traces/philly.csv") in Dir. When
// it is not there the test skips, saying how to provide it, or fails when
// $BURST_REQUIRE_DATA is 1.
func Require(tb testing.TB, rel string) string {
	tb.Helper()
	d, err := Dir()
	p := filepath.Join(d, rel)
	if err == nil {
		_, err = os.Stat(p)
	}
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("shared data %s missing (%v): check out shared/ beside the clone or set $%s", rel, err, EnvDir)
	if os.Getenv(EnvRequire) == "1" {
		tb.Fatalf("%s=1 and %s", EnvRequire, msg)
	}
	tb.Skipf("SKIPPING (set %s=1 to make this fatal): %s", EnvRequire, msg)
	return ""
}
