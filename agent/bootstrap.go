package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/bootstrap"
	"github.com/burst-hpc/burst/internal/compose"
)

// bootstrapCommand is `burst-agent bootstrap`: the node's boot sequence
// (user data, munge, FSx mount, checkpoint root, slurmd, agent), run by the
// burst-bootstrap systemd unit in the image and, in direct mode, by the
// end-to-end harness inside a network-namespace "instance".
func bootstrapCommand() *cli.Command {
	return &cli.Command{
		Name:  "bootstrap",
		Usage: "join this instance to Slurm from its burst user data (run once at boot)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "exec", Value: string(bootstrap.ExecSystemd), Usage: "systemd (the image) or direct (start daemons as children: tests)"},
			&cli.StringFlag{Name: "user-data-file", Usage: "read user data from this file instead of instance metadata"},
			&cli.StringFlag{Name: "imds-endpoint", EnvVars: []string{"BURST_IMDS_ENDPOINT"}, Usage: "instance metadata endpoint (default EC2's)"},
			&cli.StringFlag{Name: "node-name", Usage: "Slurm node name (default: from the instance's burst:node / burst:nodes tags)"},
			&cli.StringFlag{Name: "run-dir", Value: "/run/burst", Usage: "env files, credential, pid files, status.json"},
			&cli.StringFlag{Name: "slurmd", Usage: "slurmd binary (default /usr/sbin/slurmd)"},
			&cli.StringFlag{Name: "scontrol", Usage: "scontrol binary (default /usr/bin/scontrol)"},
			&cli.DurationFlag{Name: "register-timeout", Value: 90 * time.Second, Usage: "longest wait for slurmctld to see the node"},
			&cli.DurationFlag{Name: "gpu-gate-timeout", Value: bootstrap.DefaultGateTimeout, Usage: "longest the GPU gate (count, model, NVML health, dcgmi diag) may take before slurmd starts; longer fails the node"},
			&cli.StringFlag{Name: "dcgmi", Value: "/usr/bin/dcgmi", Usage: "dcgmi binary for the GPU gate's diagnostic (gpu_health.dcgm_level)"},
			&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"BURST_LOG_LEVEL"}, Usage: "debug, info, warn or error"},
		},
		Action: func(c *cli.Context) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			log := compose.StderrLogger(c.App.ErrWriter, c.String("log-level"), "burst-agent bootstrap", false)
			o := bootstrap.Options{
				Exec: bootstrap.ExecMode(c.String("exec")), UserDataFile: c.String("user-data-file"),
				IMDSEndpoint: c.String("imds-endpoint"), NodeName: c.String("node-name"), RunDir: c.String("run-dir"),
				RegisterTimeout: c.Duration("register-timeout"), Logger: log,
				GPUGate: gpuGate(log.With("step", bootstrap.StepGPUGate), c.String("dcgmi")), GateTimeout: c.Duration("gpu-gate-timeout"),
				CleanExec: []string{self, "exec-clean", "--"},
				// the EC2 emulator's poweroff stand-in (the agent's
				// --emu-shutdown-url): root only, as a real poweroff
				RootOnly: nonEmpty(os.Getenv("BURST_EMU_SHUTDOWN_URL")),
				Commands: bootstrap.Commands{Agent: self, Slurmd: c.String("slurmd"), Scontrol: c.String("scontrol")},
			}
			rep, err := bootstrap.RunReport(c.Context, o)
			for _, s := range rep.Steps {
				log.Info("step", "step", s.Step, "ms", float64(s.Duration.Microseconds())/1000)
			}
			if err != nil {
				return cli.Exit(fmt.Sprintf("burst-agent bootstrap: %v (status in %s)", err, filepath.Join(o.RunDir, "status.json")), 1)
			}
			if o.Exec == bootstrap.ExecDirect {
				// direct mode: slurmd and the agent are our children; stay
				// until the instance is stopped
				<-c.Context.Done()
			}
			return nil
		},
	}
}

// execCleanCommand is `burst-agent exec-clean -- PROG ARGS`: exec PROG with
// an empty signal mask (a process started from slurmctld's ResumeProgram
// inherits SIGTERM/SIGUSR1 blocked, and jobs would never see their
// checkpoint signal).
func execCleanCommand() *cli.Command {
	return &cli.Command{
		Name:            "exec-clean",
		Hidden:          true,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			if len(args) == 0 {
				return cli.Exit("usage: burst-agent exec-clean -- PROGRAM [ARGS...]", 2)
			}
			return bootstrap.ExecClean(args, os.Environ())
		},
	}
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
