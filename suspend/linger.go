package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/lifecycle"
	"github.com/burst-hpc/burst/internal/slurm"
)

// lingerCommand is `burst-suspend linger`: the warm-reuse window of nodes
// kept up at job end. It pokes the waiting jobs, sleeps until the window
// ends and then powers down the nodes no job took.
func lingerCommand(open func(*cli.Context) (*compose.Stack, error)) *cli.Command {
	return &cli.Command{
		Name:   "linger",
		Usage:  "keep warm nodes for waiting jobs until a time, then power down those left idle (started by the epilog)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "until", Usage: "RFC 3339 time the warm-reuse window ends"},
			&cli.StringFlag{Name: "nodes", Usage: "hostlist of the warm nodes"},
			&cli.StringFlag{Name: "poke", Usage: "comma-separated ids of the jobs waiting for the nodes"},
		},
		Action: func(c *cli.Context) error {
			t, err := time.Parse(time.RFC3339Nano, c.String("until"))
			ns, herr := hostlist.Expand(c.String("nodes"))
			if err != nil || herr != nil || len(ns) == 0 {
				return cmdline.Usagef("usage: %s linger --until RFC3339 --nodes HOSTLIST", prog)
			}
			st, err := open(c)
			if err != nil {
				return err
			}
			defer st.Close()
			return linger(c.Context, st, ns, t, parseIDs(c.String("poke")))
		},
	}
}

func parseIDs(s string) []uint32 {
	var out []uint32
	for _, f := range strings.Split(s, ",") {
		var id uint32
		if _, err := fmt.Sscan(f, &id); err == nil && id > 0 {
			out = append(out, id)
		}
	}
	return out
}

func linger(ctx context.Context, st *compose.Stack, nodes []string, until time.Time, waiting []uint32) error {
	if len(waiting) > 0 {
		lifecycle.Poke(ctx, st.Slurm, nodes, waiting, st.Log)
	}
	time.Sleep(time.Until(until))
	if _, err := lifecycle.LingerOnce(ctx, st.Slurm, nodes, st.Log); err != nil {
		st.Log.Error("warm-reuse window", "err", err)
		return err
	}
	return nil
}

// startLinger starts `burst-suspend linger` detached (own session, empty
// signal mask), so the epilog returns at once. The timer gets env without
// the epilog's SLURM_SCRIPT_CONTEXT and SLURM_JOB_*: it is not an epilog.
func startLinger(cfgPath string, env []string, nodes []string, until time.Time, waiting []uint32) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding burst-suspend: %w", err)
	}
	hl, err := hostlist.Compress(nodes)
	if err != nil {
		hl = strings.Join(nodes, ",")
	}
	ids := make([]string, len(waiting))
	for i, j := range waiting {
		ids[i] = fmt.Sprint(j)
	}
	cmd := exec.Command(self, "--config", cfgPath, "linger", "--until", until.UTC().Format(time.RFC3339Nano), "--nodes", hl, "--poke", strings.Join(ids, ","))
	for _, e := range env {
		if !strings.HasPrefix(e, "SLURM_SCRIPT_CONTEXT=") && !strings.HasPrefix(e, "SLURM_JOB_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive the epilog's process group
	if err := slurm.StartUnblocked(cmd); err != nil {
		return fmt.Errorf("starting the warm-reuse timer: %w", err)
	}
	return cmd.Process.Release()
}
