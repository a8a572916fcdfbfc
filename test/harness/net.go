package harness

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Network describes the per-run bridge the controller listens on and the
// node namespaces attach to.
type Network struct {
	Bridge  string       // e.g. "bst3fa2c1br"
	Prefix  netip.Prefix // e.g. 10.137.22.0/24
	Gateway netip.Addr   // bridge address = slurmctld address, e.g. 10.137.22.1
}

const (
	// Prefix starts every bridge, veth and namespace name the harness makes.
	Prefix = "bst"
	// stateDir holds one record per live run (and its subnet claim), so that
	// CleanupStale can tell crashed runs from concurrent live ones.
	stateDir = "/run/bst-harness"
	netnsDir = "/run/netns"
	firstIP  = 10  // node addresses are .10 ...
	lastIP   = 250 // ... to .250
)

func (c *Cluster) ip(ctx context.Context, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, c.ipBin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("running %s %s: %w: %s", c.ipBin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func findIP() (string, error) {
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("finding the ip command: not in /usr/sbin, /sbin, /usr/bin or /bin; install iproute2")
}

// usedSubnets returns the /24s (as 10.x.y) with an address on any interface
// of this namespace.
func usedSubnets() map[[2]byte]bool {
	used := map[[2]byte]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if v4 := n.IP.To4(); v4 != nil && v4[0] == 10 {
				used[[2]byte{v4[1], v4[2]}] = true
			}
		}
	}
	return used
}

// claimSubnet picks a random free 10.x.y.0/24 (x in 64..249) and claims it
// with an O_EXCL file under stateDir, so concurrent runs never share one.
func claimSubnet(id string) (netip.Prefix, string, error) {
	used := usedSubnets()
	for range 200 {
		var b [2]byte
		_, _ = rand.Read(b[:])
		x := 64 + b[0]%186
		xy := [2]byte{x, b[1]}
		if used[xy] || (x == 250 && b[1] == 0) { // 10.250.0.0/24: the slurm-lab recipe's
			continue
		}
		claim := filepath.Join(stateDir, fmt.Sprintf("subnet-10.%d.%d", xy[0], xy[1]))
		f, err := os.OpenFile(claim, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return netip.Prefix{}, "", fmt.Errorf("claiming subnet: %w", err)
		}
		_, _ = f.WriteString(id + "\n")
		f.Close()
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, xy[0], xy[1], 0}), 24), claim, nil
	}
	return netip.Prefix{}, "", errors.New("claiming subnet: no free 10.x.y.0/24 found in 200 tries; run harness.CleanupStale")
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%06x", binary.BigEndian.Uint32(b[:])&0xffffff)
}

// setupBridge creates the run's bridge with the gateway address.
func (c *Cluster) setupBridge(ctx context.Context) error {
	br := c.net.Bridge
	if err := c.ip(ctx, "link", "add", br, "type", "bridge"); err != nil {
		return fmt.Errorf("creating bridge (needs root/CAP_NET_ADMIN): %w", err)
	}
	c.bridgeMade = true
	if err := c.ip(ctx, "addr", "add", netip.PrefixFrom(c.net.Gateway, 24).String(), "dev", br); err != nil {
		return err
	}
	return c.ip(ctx, "link", "set", br, "up")
}

// AllocIP reserves the next free node address on the run's subnet, going
// round the subnet from the one after the last it gave: an address just
// released is taken again only after every other, as EC2 rarely gives a
// new instance the address of one terminated seconds before. (Taking the
// lowest free one gave a replacement node its dead predecessor's address
// while slurmctld still retried the predecessor's job kill to it, and the
// requeued job running there got the SIGTERM.) StartNode and StartSlurmd
// call it when given the zero address; an external boot hook (e.g. the EC2
// emulator's "private IP") can call it itself and pass the result on.
// StopNode releases the address.
func (c *Cluster) AllocIP() (netip.Addr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	base := c.net.Prefix.Addr().As4()
	n := lastIP - firstIP + 1
	start := max(c.nextIP-firstIP, 0)
	for k := range n {
		i := firstIP + (start+k)%n
		a := base
		a[3] = byte(i)
		ip := netip.AddrFrom4(a)
		if !c.ips[ip] {
			c.ips[ip] = true
			c.nextIP = i + 1
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("allocating node address: all of .%d-.%d in %s are in use", firstIP, lastIP, c.net.Prefix)
}

// bindIP marks ip as used by a node; it must be a host address of the
// run's subnet other than the gateway, and not used by another node (it may
// come from AllocIP).
func (c *Cluster) bindIP(ip netip.Addr) error {
	if !ip.Is4() || !c.net.Prefix.Contains(ip) || ip == c.net.Gateway || ip == c.net.Prefix.Addr() || ip.As4()[3] == 255 {
		return fmt.Errorf("node address %s: not a usable host address in %s (use Cluster.AllocIP)", ip, c.net.Prefix)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bound[ip] {
		return fmt.Errorf("node address %s: already used by another node of this cluster", ip)
	}
	c.ips[ip] = true
	c.bound[ip] = true
	return nil
}

// ReleaseIP returns an address from AllocIP that no node uses (StopNode
// releases node addresses itself).
func (c *Cluster) ReleaseIP(ip netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.bound[ip] {
		delete(c.ips, ip)
	}
}

func (c *Cluster) releaseIP(ip netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ips, ip)
	delete(c.bound, ip)
}

// netnsName is the namespace of node name: "bst-<id>-<name>".
func (c *Cluster) netnsName(node string) string { return fmt.Sprintf("%s-%s-%s", Prefix, c.id, node) }

// setupNodeNet creates the node's namespace and a veth pair: host side
// "bst<id>v<n>" on the bridge, "eth0" with ip/24 inside.
func (c *Cluster) setupNodeNet(ctx context.Context, n *Node) error {
	ns := n.netns
	if err := c.ip(ctx, "netns", "add", ns); err != nil {
		return fmt.Errorf("creating namespace for node %s: %w", n.Name, err)
	}
	steps := [][]string{
		{"link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"link", "set", n.veth, "master", c.net.Bridge, "up"},
		{"-n", ns, "addr", "add", netip.PrefixFrom(n.IP, 24).String(), "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := c.ip(ctx, s...); err != nil {
			return fmt.Errorf("setting up network of node %s: %w", n.Name, err)
		}
	}
	return nil
}

// deleteNetns kills every process left in the namespace, deletes it and the
// host end of its veth (normally gone with the namespace already).
func (c *Cluster) deleteNetns(ns, veth string) error {
	var errs []error
	path := filepath.Join(netnsDir, ns)
	if _, err := os.Stat(path); err == nil {
		if list, err := pidsInNetns(path); err == nil && len(list) > 0 {
			c.log.Debug("killing processes left in namespace", "netns", ns, "pids", list)
			if err := killPids(list); err != nil {
				errs = append(errs, err)
			}
		}
		if err := c.ip(context.Background(), "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	if veth != "" {
		// The kernel removes the host end asynchronously once the namespace
		// is gone; delete it only if it lingers.
		for i := 0; i < 50; i++ {
			if _, err := net.InterfaceByName(veth); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := net.InterfaceByName(veth); err == nil {
			if err := c.ip(context.Background(), "link", "del", veth); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
