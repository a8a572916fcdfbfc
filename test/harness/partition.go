package harness

import (
	"context"
	"fmt"
)

// Partition cuts node name off the cluster's network, as a failed switch
// port or a security-group change would: the host end of its veth goes
// down, so packets between the node and everything else (slurmctld, the
// sizer, the EC2 emulator's metadata) are lost without an answer, while the
// node's processes keep running. heal brings the link back.
func (c *Cluster) Partition(ctx context.Context, name string) (heal func() error, err error) {
	c.mu.Lock()
	n, ok := c.nodes[name]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("partitioning node %s: node not started", name)
	}
	if err := c.ip(ctx, "link", "set", n.veth, "down"); err != nil {
		return nil, fmt.Errorf("partitioning node %s: %w", name, err)
	}
	c.log.Info("node partitioned", "node", name, "veth", n.veth)
	return func() error {
		if err := c.ip(context.Background(), "link", "set", n.veth, "master", c.net.Bridge, "up"); err != nil {
			return fmt.Errorf("healing the partition of node %s: %w", name, err)
		}
		c.log.Info("node partition healed", "node", name)
		return nil
	}, nil
}
