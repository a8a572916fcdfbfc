// Package gputest is for the tests that read real GPUs (make test-gpu):
// without a driver or GPUs they skip, saying why, and fail instead under
// BURST_REQUIRE_GPU=1, which a run on a GPU machine sets so that a broken
// driver or a missing GPU is never taken for "no GPU here".
package gputest

import (
	"fmt"
	"os"
	"testing"
)

// EnvRequire turns the skips into failures.
const EnvRequire = "BURST_REQUIRE_GPU"

// Skip skips t with the message, or fails it under BURST_REQUIRE_GPU=1.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s (%s=1: a GPU machine must have these)", msg, EnvRequire)
	}
	t.Skip("SKIP: " + msg)
}
