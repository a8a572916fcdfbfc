package stack

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/ec2emu/awsmodel"
)

// Cloud is the EC2 emulator of one stack or of several. A stack starts a
// private one unless Options.Cloud gives it one to share (NewCloud): one
// AWS account and region in which several clusters launch, as sites with
// several Slurm clusters run them. Each instance belongs to the stack whose
// cluster.name its burst:cluster tag names, as burst itself tells its
// instances apart: that stack gives it an address on its network, serves
// its metadata there, boots it as one of its nodes and stops it.
type Cloud struct {
	Emu *ec2emu.Server

	opts    ec2emu.Options
	private *Stack // the only stack of a private cloud
	mu      sync.Mutex
	stacks  map[string]*Stack // by cluster.name
	first   *config.Config    // of the stack that started the emulator
}

// NewCloud returns an emulator for stacks to share (Options.Cloud). The
// first stack to start starts it with its burst.yaml's region, subnets,
// security groups and AMI (o's addresses, boot hooks and instance
// metadata host are the stacks'); a later stack must name the same region
// and subnets and its own cluster.name. Close it after every stack that
// shares it stopped.
func NewCloud(o ec2emu.Options) *Cloud {
	return &Cloud{opts: o, stacks: map[string]*Stack{}}
}

// Close stops the emulator.
func (c *Cloud) Close() {
	c.mu.Lock()
	emu := c.Emu
	c.mu.Unlock()
	if emu != nil {
		emu.Close() // not under c.mu: it waits for hooks, which take it
	}
}

// join makes s one of the cloud's stacks, starting the emulator for the
// first.
func (c *Cloud) join(s *Stack) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := s.Cfg
	if other, ok := c.stacks[cfg.Cluster.Name]; ok && other != s {
		return fmt.Errorf("stack: cluster.name %q already launches into this cloud: give each stack sharing it a cluster.name of its own", cfg.Cluster.Name)
	}
	if c.Emu != nil {
		if cfg.Cluster.Region != c.first.Cluster.Region || !maps.Equal(cfg.Network.Subnets, c.first.Network.Subnets) {
			return fmt.Errorf("stack: cluster %q: a shared cloud is one region with one set of subnets: its burst.yaml names %s %v, the cloud's %s %v",
				cfg.Cluster.Name, cfg.Cluster.Region, cfg.Network.Subnets, c.first.Cluster.Region, c.first.Network.Subnets)
		}
		c.stacks[cfg.Cluster.Name] = s
		return nil
	}
	eo := c.opts
	eo.Region = cfg.Cluster.Region
	eo.Subnets = map[string]string{}
	for z, sn := range cfg.Network.Subnets {
		eo.Subnets[sn] = z
	}
	// the security groups and AMI of burst.yaml exist (burst-sizer doctor describes them)
	if eo.SecurityGroups == nil {
		eo.SecurityGroups = slices.Clone(cfg.Network.SecurityGroups)
	}
	if eo.Images == nil && cfg.Image.AMI != "" {
		eo.Images = []string{cfg.Image.AMI}
	}
	eo.IMDSHostFor = func(in ec2emu.Instance) string {
		if s := c.stackOf(in); s != nil {
			return s.Cluster.ControllerAddr().String()
		}
		return "127.0.0.1" // no stack's node: reachable from none
	}
	eo.AllocateIP = func(in ec2emu.Instance) (string, error) {
		s := c.stackOf(in)
		if s == nil {
			return "", fmt.Errorf("no stack of cluster %q shares this emulator", in.Tags[ec2p.TagCluster])
		}
		ip, err := s.Cluster.AllocIP()
		return ip.String(), err
	}
	eo.ReleaseIP = func(in ec2emu.Instance) {
		if s := c.stackOf(in); s != nil {
			if ip, err := netip.ParseAddr(in.PrivateIP); err == nil {
				s.Cluster.ReleaseIP(ip)
			}
		}
	}
	eo.IMDSFromInstanceOnly = true // as EC2's: an instance's metadata is for that instance only
	eo.OnStart = func(in ec2emu.Instance) {
		if s := c.stackOf(in); s != nil {
			s.onStart(in)
		}
	}
	eo.OnStop = func(in ec2emu.Instance) {
		if s := c.stackOf(in); s != nil {
			s.onStop(in)
		}
	}
	if eo.Logger == nil {
		eo.Logger = s.log
	}
	if eo.Models == nil {
		// every EC2 and SQS answer is checked against AWS's API models
		// (botocore's); the test reads ModelViolations at its end
		models, err := awsmodel.Default()
		if err != nil {
			return fmt.Errorf("stack: loading AWS's API models to check the emulator's responses against (scripts/install-deps.sh checks for them): %w", err)
		}
		eo.Models = models
	}
	emu := ec2emu.New(eo)
	if err := emu.Start(); err != nil {
		return fmt.Errorf("stack: starting the EC2 emulator: %w", err)
	}
	c.Emu, c.first = emu, cfg
	c.stacks[cfg.Cluster.Name] = s
	return nil
}

// leave ends s's part in the cloud; a private cloud stops with it. An
// instance of s's cluster still running is then nobody's node.
func (c *Cloud) leave(s *Stack) {
	if c.private == s {
		c.Close()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stacks[s.Cfg.Cluster.Name] == s {
		delete(c.stacks, s.Cfg.Cluster.Name)
	}
}

// stackOf is the stack an instance belongs to (nil: none).
func (c *Cloud) stackOf(in ec2emu.Instance) *Stack {
	if c.private != nil {
		return c.private
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stacks[in.Tags[ec2p.TagCluster]]
}

// Instances is the emulator's instances of this stack's cluster: every
// instance of a private cloud, those tagged with its cluster.name in a
// shared one.
func (s *Stack) Instances() []ec2emu.Instance {
	all := s.Emu.Instances()
	if s.cloud.private == s {
		return all
	}
	return slices.DeleteFunc(all, func(in ec2emu.Instance) bool { return in.Tags[ec2p.TagCluster] != s.Cfg.Cluster.Name })
}
