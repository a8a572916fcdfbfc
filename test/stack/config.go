package stack

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/burst-hpc/burst/internal/clifilter"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/harness"
)

// eventRule points burst.yaml's interruption queue at the emulator (which
// serves SQS on its own address) and adds the EventBridge rule that fills
// it, or turns the queue off with NoEvents.
func (s *Stack) eventRule() error {
	if s.opts.NoEvents {
		s.Cfg.Interruptions = config.Interruptions{AgentWait: s.Cfg.Interruptions.AgentWait, ScheduledPoll: s.Cfg.Interruptions.ScheduledPoll}
		return nil
	}
	q, ok := s.Cfg.Interruptions.Queue()
	if !ok {
		q = config.Queue{Region: s.Cfg.Cluster.Region, Account: ec2emu.DefaultAccount, Name: "burst-" + s.Cfg.Cluster.Name + "-interruptions"}
		s.Cfg.Interruptions.QueueURL = "https://sqs." + q.Region + ".amazonaws.com/" + q.Account + "/" + q.Name
	}
	rule := s.opts.EventRule
	rule.Queue = q.Name
	if _, err := s.Emu.AddEventRule(rule); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	s.Cfg.Interruptions.SQSEndpoint = s.Emu.URL()
	return nil
}

// prepare runs once the cluster's directory and network exist: it points
// burst.yaml at the controller and writes it beside slurm.conf, where
// burst-resume and burst-suspend find it through $SLURM_CONF.
func (s *Stack) prepare(c *harness.Cluster) error {
	s.Cluster = c
	ctld, _ := c.Ports()
	s.Cfg.Slurm.Controller = c.ControllerAddr().String()
	s.Cfg.Slurm.ControllerPort = ctld
	s.Cfg.Slurm.NodeConf = c.ConfPath()
	s.Cfg.Slurm.ConfDir = filepath.Dir(c.ConfPath())
	// nodes share this machine's file system: they use the cluster's own
	// munge key and running munged, never the host's /etc/munge
	key := filepath.Join(c.Dir(), "munge", "key", "munge.key")
	s.Cfg.Slurm.MungeKeySource = "file://" + key
	s.Cfg.Slurm.MungeKeyPath = key
	s.Cfg.Slurm.MungeSocket = c.MungeSocket()
	port, err := harness.FreePort(c.ControllerAddr().String())
	if err != nil {
		return err
	}
	s.Cfg.Sizer.Listen = net.JoinHostPort(c.ControllerAddr().String(), strconv.Itoa(port))
	s.Cfg.Sizer.URL = "https://" + s.Cfg.Sizer.Listen
	s.CfgPath = filepath.Join(filepath.Dir(c.ConfPath()), "burst.yaml")
	if s.Cfg.Slurm.CliFilter {
		// what burst-slurm-conf writes beside slurm.conf, pointing at this
		// run's burst.yaml
		o := clifilter.Options{SizerPath: filepath.Join(s.opts.HookBin, "burst-sizer"), GlobalArgs: []string{"--config", s.CfgPath}, Timeout: 20 * time.Second}
		for _, p := range s.Cfg.Slurm.Partitions {
			o.Partitions = append(o.Partitions, p.Name)
			if p.Default {
				o.DefaultPartition = p.Name
			}
		}
		lua, err := clifilter.Render(o)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(c.ConfPath()), "cli_filter.lua"), lua, 0o644); err != nil {
			return err
		}
	}
	// the nodes share one file system and have no /run/burst of their own:
	// the Prolog and TaskProlog learn the checkpoint root here
	ckpt := filepath.Join(s.Cfg.FSx.MountPoint, s.Cfg.FSx.CheckpointDir)
	for _, b := range []string{"burst-resume", "burst-suspend", "burst-agent", "burst-sizer"} {
		w := fmt.Sprintf("#!/bin/sh\nBURST_CONFIG=%s BURST_CHECKPOINT_ROOT=%s exec %s \"$@\"\n", s.CfgPath, ckpt, filepath.Join(s.opts.HookBin, b))
		if err := os.WriteFile(filepath.Join(s.Dir, "bin", b), []byte(w), 0o755); err != nil {
			return err
		}
	}
	return s.writeConfig()
}

func (s *Stack) writeConfig() error {
	if s.CfgPath == "" {
		return nil
	}
	b, err := yaml.Marshal(s.Cfg)
	if err != nil {
		return fmt.Errorf("stack: writing burst.yaml: %w", err)
	}
	if err := os.WriteFile(s.CfgPath, b, 0o644); err != nil {
		return fmt.Errorf("stack: writing burst.yaml: %w", err)
	}
	if _, err := config.Load(s.CfgPath); err != nil {
		return fmt.Errorf("stack: the burst.yaml it wrote does not load: %w", err)
	}
	return nil
}

// UpdateConfig edits burst.yaml while the stack runs (Slurm's hooks read it
// on every call).
func (s *Stack) UpdateConfig(f func(*config.Config)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.Cfg)
	return s.writeConfig()
}
