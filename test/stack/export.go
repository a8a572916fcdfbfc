package stack

import (
	"context"

	"github.com/burst-hpc/burst/test/ec2emu"
)

// BootstrapNode is the default Options.Boot: `burst-agent bootstrap` with
// the instance's user data in the node's namespace. Tests that boot only
// some instances differently wrap it.
func BootstrapNode(ctx context.Context, s *Stack, in ec2emu.Instance, node string) error {
	return bootstrapNode(ctx, s, in, node)
}
