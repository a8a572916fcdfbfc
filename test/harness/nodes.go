package harness

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// StartNode creates node name's network namespace (veth on the bridge,
// address ip/24; the zero ip means AllocIP) and runs argv in it through
// `nsenter --net=/run/netns/NS` in a new session with an empty signal mask,
// Environ() and output to <dir>/log/node-<name>.out. It is an error if the
// node is already running; use NodeExec to add processes.
func (c *Cluster) StartNode(ctx context.Context, name string, ip netip.Addr, argv ...string) (*Node, error) {
	n, err := c.addNode(ctx, name, ip)
	if err != nil {
		return nil, err
	}
	if len(argv) > 0 {
		if err := c.NodeExec(ctx, name, argv...); err != nil {
			_ = c.StopNode(name)
			return nil, err
		}
	}
	return n, nil
}

func (c *Cluster) addNode(ctx context.Context, name string, ip netip.Addr) (*Node, error) {
	if name == "" || strings.ContainsAny(name, "/ \t\n\x00") || len(name) > 200 {
		return nil, fmt.Errorf("starting node %q: invalid node name", name)
	}
	c.mu.Lock()
	_, exists := c.nodes[name]
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return nil, fmt.Errorf("starting node %s: cluster stopped", name)
	}
	if exists {
		return nil, fmt.Errorf("starting node %s: already running (StopNode first)", name)
	}
	if !ip.IsValid() {
		var err error
		if ip, err = c.AllocIP(); err != nil {
			return nil, fmt.Errorf("starting node %s: %w", name, err)
		}
	}
	if err := c.bindIP(ip); err != nil {
		return nil, fmt.Errorf("starting node %s: %w", name, err)
	}
	c.mu.Lock()
	if _, ok := c.nodes[name]; ok || c.stopped {
		c.mu.Unlock()
		c.releaseIP(ip)
		return nil, fmt.Errorf("starting node %s: already running or cluster stopped", name)
	}
	n := &Node{Name: name, IP: ip, netns: c.netnsName(name), veth: fmt.Sprintf("%s%sv%d", Prefix, c.id, ip.As4()[3])}
	c.nodes[name] = n
	c.mu.Unlock()
	if err := c.setupNodeNet(ctx, n); err != nil {
		_ = c.StopNode(name)
		return nil, err
	}
	c.log.Info("node namespace up", "node", name, "ip", ip, "netns", n.netns)
	return n, nil
}

// NodeExec starts another process inside a running node's namespace.
func (c *Cluster) NodeExec(ctx context.Context, name string, argv ...string) error {
	if len(argv) == 0 {
		return fmt.Errorf("running in node %s: empty command", name)
	}
	c.mu.Lock()
	n, ok := c.nodes[name]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("running in node %s: node not started (StartNode first)", name)
	}
	p, err := c.startProc(name+":"+filepath.Base(argv[0]), filepath.Join(c.dir, "log", "node-"+name+".out"), c.Environ(), n.Netns(), argv...)
	if err != nil {
		return fmt.Errorf("running in node %s: %w", name, err)
	}
	c.mu.Lock()
	n.procs = append(n.procs, p)
	c.mu.Unlock()
	return nil
}

// StartSlurmd boots node name as a cloud node would: after Options.SlurmdDelay
// (default 2 s; it blocks for that long) it creates the node's namespace at
// ip (zero: AllocIP) and runs `slurmd -D -b -N name -f slurm.conf` there.
// Its signature suits an external boot hook (e.g. the EC2 emulator's
// instance start); run it in a goroutine to boot asynchronously.
func (c *Cluster) StartSlurmd(ctx context.Context, name string, ip netip.Addr) (*Node, error) {
	if c.opts.SlurmdDelay > 0 {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("starting slurmd for %s: %w", name, ctx.Err())
		case <-time.After(c.opts.SlurmdDelay):
		}
	}
	// slurmd otherwise logs "Domain socket directory ... No such file" first.
	if err := os.MkdirAll(filepath.Join(c.dir, "spool", name), 0o755); err != nil {
		return nil, fmt.Errorf("starting slurmd for %s: %w", name, err)
	}
	return c.StartNode(ctx, name, ip, c.opts.SbinDir+"/slurmd", "-D", "-b", "-N", name, "-f", c.ConfPath())
}

// StopNode stops a node: SIGTERM then SIGKILL to its processes, SIGKILL to
// anything else in its namespace, then deletes the namespace and veth and
// releases its address. Stopping an unknown node is not an error.
func (c *Cluster) StopNode(name string) error {
	c.mu.Lock()
	n, ok := c.nodes[name]
	delete(c.nodes, name)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	stopAll(c.opts.StopGrace, n.procs...)
	err := c.deleteNetns(n.netns, n.veth)
	c.releaseIP(n.IP)
	if err != nil {
		return fmt.Errorf("stopping node %s: %w", name, err)
	}
	c.log.Info("node stopped", "node", name)
	return nil
}

// Nodes returns the names of the nodes running now, sorted.
func (c *Cluster) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for n := range c.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Node returns a running node.
func (c *Cluster) Node(name string) (*Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	return n, ok
}
