// Package torchenv finds the Python interpreter with PyTorch that the
// tests' training jobs run: Debian's /usr/bin/python3 with python3-torch
// (scripts/install-deps.sh installs it), or $BURST_TORCH_PYTHON. A test
// without it skips, and fails under BURST_REQUIRE_TOOLS=1. It also holds what
// examples/train's and test/e2e's training tests share: FreePort, TensorData.
package torchenv

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Default is the interpreter looked for unless BURST_TORCH_PYTHON names
// another.
const Default = "/usr/bin/python3"

// Python returns the interpreter where command runs it (nil: this
// machine's exec.Command), where naming that place in messages ("the
// host", a Debian root). noTorchSkip, when set, is the skip message used
// instead of failing when torch is missing there by design (the Debian
// roots carry no torch).
func Python(t testing.TB, where string, command func(ctx context.Context, name string, args ...string) *exec.Cmd, noTorchSkip string) string {
	t.Helper()
	py := Default
	if p := os.Getenv("BURST_TORCH_PYTHON"); p != "" {
		py = p
	}
	if command == nil {
		command = exec.CommandContext
	}
	out, err := command(context.Background(), py, "-c", "import torch; print(torch.__version__)").CombinedOutput()
	if err != nil {
		if noTorchSkip != "" {
			t.Skip(noTorchSkip)
		}
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("PyTorch is missing in %s (%s -c 'import torch': %v: %s); scripts/install-deps.sh installs python3-torch", where, py, err, out)
		}
		t.Skipf("SKIP: PyTorch is missing in %s (%v); scripts/install-deps.sh installs python3-torch", where, err)
	}
	t.Logf("torch %s (%s, %s)", strings.TrimSpace(string(out)), py, where)
	return py
}
