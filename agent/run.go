package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/agent/attrib"
	"github.com/burst-hpc/burst/agent/deadman"
	"github.com/burst-hpc/burst/agent/gpu"
	"github.com/burst-hpc/burst/agent/gpu/sim"
	"github.com/burst-hpc/burst/agent/interrupt"
	"github.com/burst-hpc/burst/agent/report"
	"github.com/burst-hpc/burst/agent/sampler"
	"github.com/burst-hpc/burst/internal/catalog"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Paths under --sizer-url: report batches and notices.
const (
	ReportPath       = sizerapi.PathReports
	InterruptionPath = sizerapi.PathInterruptions
)

func runCommand() *cli.Command {
	host, _ := os.Hostname()
	return &cli.Command{
		Name:  "run",
		Usage: "sample GPUs, report to the sizer, handle spot interruptions (the systemd service)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "node", Value: host, EnvVars: []string{"BURST_NODE", "BURST_NODE_NAME"}, Usage: "Slurm node name of this machine"},
			&cli.StringFlag{Name: "sizer-url", EnvVars: []string{"BURST_SIZER_URL"}, Usage: "base URL of burst-sizer serve; reports go to <url>" + ReportPath + ", notices to <url>" + InterruptionPath + " (required)"},
			&cli.StringFlag{Name: "credential-file", Value: "/etc/burst/agent-token", EnvVars: []string{"BURST_CREDENTIAL_FILE"}, Usage: "file whose first line is the agent's bearer token for the sizer"},
			&cli.StringFlag{Name: "imds-endpoint", EnvVars: []string{"BURST_IMDS_ENDPOINT"}, Usage: "instance metadata endpoint (default: EC2's 169.254.169.254)"},
			&cli.BoolFlag{Name: "no-imds", EnvVars: []string{"BURST_NO_IMDS"}, Usage: "do not poll instance metadata (not on EC2 / not spot)"},
			&cli.DurationFlag{Name: "imds-poll", Value: 2 * time.Second, EnvVars: []string{"BURST_IMDS_POLL"}, Usage: "instance metadata poll interval"},
			&cli.StringFlag{Name: "instance-id", EnvVars: []string{"BURST_INSTANCE_ID"}, Usage: "EC2 instance id (default: read from instance metadata)"},
			&cli.DurationFlag{Name: "sample-interval", Value: time.Second, EnvVars: []string{"BURST_SAMPLE_INTERVAL"}, Usage: "GPU sampling interval"},
			&cli.DurationFlag{Name: "interval", Value: 15 * time.Second, EnvVars: []string{"BURST_REPORT_INTERVAL"}, Usage: "report interval (batches are sent this often)"},
			&cli.StringFlag{Name: "state-dir", Value: "/var/lib/burst-agent", EnvVars: []string{"BURST_STATE_DIR"}, Usage: "directory of the on-disk report buffer"},
			&cli.Int64Flag{Name: "buffer-max-bytes", Value: 64 << 20, EnvVars: []string{"BURST_BUFFER_MAX_BYTES"}, Usage: "cap of the on-disk report buffer; the oldest records are dropped (and counted) beyond it"},
			&cli.StringFlag{Name: "gpu-source", Value: "auto", EnvVars: []string{"BURST_GPU_SOURCE"}, Usage: "auto (NVML if the driver loads, else simulated), nvml, or sim"},
			&cli.IntFlag{Name: "sim-gpus", Value: 8, EnvVars: []string{"BURST_SIM_GPUS"}, Usage: "number of simulated GPUs"},
			&cli.Uint64Flag{Name: "sim-seed", Value: 1, EnvVars: []string{"BURST_SIM_SEED"}, Usage: "seed of the simulated utilisation curves"},
			&cli.StringFlag{Name: "checkpoint-root", Value: "/fsx/burst/checkpoints", EnvVars: []string{"BURST_CHECKPOINT_ROOT"}, Usage: "jobs checkpoint into <root>/<job id> ($BURST_CHECKPOINT_DIR)"},
			&cli.StringFlag{Name: "checkpoint-signal", Value: "USR1", EnvVars: []string{"BURST_CHECKPOINT_SIGNAL"}, Usage: "default checkpoint signal, sent to the batch shell"},
			&cli.DurationFlag{Name: "grace", Value: 90 * time.Second, EnvVars: []string{"BURST_CHECKPOINT_GRACE"}, Usage: "longest wait for a job's checkpoint marker after the signal"},
			&cli.DurationFlag{Name: "reserve", Value: 20 * time.Second, EnvVars: []string{"BURST_CHECKPOINT_RESERVE"}, Usage: "time kept before EC2's deadline to requeue jobs and hand the node back"},
			&cli.StringFlag{Name: "slurm-bin-dir", Value: "/usr/bin", EnvVars: []string{"BURST_SLURM_BIN_DIR"}, Usage: "directory of scontrol, squeue, scancel"},
			&cli.StringFlag{Name: "slurm-conf", EnvVars: []string{"SLURM_CONF"}, Usage: "slurm.conf for the Slurm commands"},
			&cli.StringFlag{Name: "slurm-api", Value: "cli", EnvVars: []string{"BURST_AGENT_SLURM_API"}, Usage: "cli (the Slurm commands: a node has them and munge) or rest (slurmrestd, with --slurm-rest-url and --slurm-rest-token-file)"},
			&cli.StringFlag{Name: "slurm-rest-url", EnvVars: []string{"BURST_AGENT_SLURM_REST_URL"}, Usage: "slurmrestd's http(s)://host:port or unix:/path (--slurm-api rest)"},
			&cli.StringFlag{Name: "slurm-rest-token-file", EnvVars: []string{"BURST_AGENT_SLURM_REST_TOKEN_FILE"}, Usage: "file with a Slurm JWT (scontrol token) of a user that may requeue jobs and drain nodes, mode 0600, re-read when it changes (--slurm-api rest; nodes never get the JWT key)"},
			&cli.StringFlag{Name: "slurm-rest-user", EnvVars: []string{"BURST_AGENT_SLURM_REST_USER"}, Usage: "X-SLURM-USER-NAME (default: the token's user)"},
			&cli.DurationFlag{Name: "dead-man-after", Value: 15 * time.Minute, EnvVars: []string{"BURST_DEAD_MAN_AFTER"}, Usage: "terminate this instance after its node has been powered down or down in Slurm, or the controller unreachable, this long (0 disables)"},
			&cli.StringFlag{Name: "ec2-endpoint", EnvVars: []string{"BURST_EC2_ENDPOINT"}, Usage: "EC2 API endpoint for the dead-man switch (default: the region's)"},
			&cli.BoolFlag{Name: "ec2-static-credentials", EnvVars: []string{"BURST_EC2_STATIC_CREDENTIALS"}, Usage: "sign the dead-man switch's EC2 calls with dummy credentials (the EC2 emulator; test only)"},
			&cli.StringFlag{Name: "region", EnvVars: []string{"AWS_REGION"}, Usage: "AWS region (default: from instance metadata)"},
			&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"BURST_LOG_LEVEL"}, Usage: "debug, info, warn or error"},
		},
		Action: runAgent,
	}
}

// runConfig checks the flags, reporting every problem at once.
func runConfig(c *cli.Context) error {
	var errs []error
	if c.String("node") == "" {
		errs = append(errs, errors.New("--node: empty; set the Slurm node name"))
	}
	if u := c.String("sizer-url"); u == "" {
		errs = append(errs, errors.New("--sizer-url (BURST_SIZER_URL): required, e.g. http://head:8470"))
	} else if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		errs = append(errs, fmt.Errorf("--sizer-url %q: want an http(s)://host[:port] URL", u))
	}
	switch c.String("gpu-source") {
	case "auto", "nvml", "sim":
	default:
		errs = append(errs, fmt.Errorf("--gpu-source %q: want auto, nvml or sim", c.String("gpu-source")))
	}
	for _, d := range []string{"sample-interval", "interval", "imds-poll", "grace", "reserve"} {
		if c.Duration(d) <= 0 {
			errs = append(errs, fmt.Errorf("--%s %v: must be positive", d, c.Duration(d)))
		}
	}
	if c.Int64("buffer-max-bytes") < 1<<20 {
		errs = append(errs, fmt.Errorf("--buffer-max-bytes %d: want at least 1 MiB", c.Int64("buffer-max-bytes")))
	}
	if c.Int("sim-gpus") < 1 || c.Int("sim-gpus") > 64 {
		errs = append(errs, fmt.Errorf("--sim-gpus %d: want 1..64", c.Int("sim-gpus")))
	}
	switch c.String("slurm-api") {
	case "cli":
	case "rest":
		if c.String("slurm-rest-url") == "" || c.String("slurm-rest-token-file") == "" {
			errs = append(errs, errors.New("--slurm-api rest: needs --slurm-rest-url and --slurm-rest-token-file"))
		}
	default:
		errs = append(errs, fmt.Errorf("--slurm-api %q: want cli or rest", c.String("slurm-api")))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.String("log-level")))
	}
	if err := errors.Join(errs...); err != nil {
		return cli.Exit(fmt.Sprintf("invalid configuration:\n%v", err), 2)
	}
	return nil
}

// openGPUs picks the GPU source. auto uses NVML when the driver loads.
func openGPUs(source string, simGPUs int, simMemBytes, seed uint64, log *slog.Logger) (gpu.Reader, *sim.Reader, error) {
	if source != "sim" {
		r, err := gpu.Open()
		if err == nil {
			return r, nil, nil
		}
		if source == "nvml" || !errors.Is(err, gpu.ErrNoDriver) {
			return nil, nil, err
		}
		log.Warn("no NVIDIA driver; using simulated GPUs", "err", err)
	}
	s, err := sim.New(sim.Options{GPUs: simGPUs, Seed: seed, MemoryTotalBytes: simMemBytes})
	return s, s, err
}

func runAgent(c *cli.Context) error {
	if err := runConfig(c); err != nil {
		return err
	}
	log := compose.StderrLogger(c.App.ErrWriter, c.String("log-level"), "", false).With("node", c.String("node"))
	slog.SetDefault(log)
	ctx := c.Context
	node := c.String("node")

	imdsClient := imds.New(imds.Options{Endpoint: c.String("imds-endpoint")})
	instanceID := c.String("instance-id")
	if instanceID == "" && !c.Bool("no-imds") {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		id, err := imdsClient.InstanceID(ictx)
		cancel()
		if err != nil {
			log.Warn("cannot read the instance id; reports carry none", "err", err)
		}
		instanceID = id
	}
	log = log.With("instance_id", instanceID)

	// simulated GPUs take the instance type's shape from the catalog, so
	// the sizer's feedback store sees plausible memory figures
	simGPUs, simMem := c.Int("sim-gpus"), uint64(0)
	if !c.IsSet("sim-gpus") && !c.Bool("no-imds") {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if typ, err := imdsClient.InstanceType(tctx); err == nil {
			if t, ok := catalog.Default().Lookup(typ); ok && t.GPUs > 0 {
				simGPUs, simMem = t.GPUs, uint64(t.GPUMemoryMiB)<<20
			}
		}
		cancel()
	}
	reader, simReader, err := openGPUs(c.String("gpu-source"), simGPUs, simMem, c.Uint64("sim-seed"), log)
	if err != nil {
		return cli.Exit(fmt.Sprintf("opening GPUs: %v", err), 3)
	}
	defer reader.Close()
	devs, _ := reader.Devices()
	log.Info("burst-agent starting", "gpus", len(devs), "gpu_source", c.String("gpu-source"), "simulated", simReader != nil)

	base := strings.TrimRight(c.String("sizer-url"), "/")
	sink := &report.HTTPSink{URL: base + ReportPath, CredentialFile: c.String("credential-file")}
	rep, err := report.New(sink, report.Options{Node: node, InstanceID: instanceID, Dir: filepath.Clean(c.String("state-dir")),
		Interval: c.Duration("interval"), Spool: report.SpoolOptions{MaxBytes: c.Int64("buffer-max-bytes")}, Logger: log})
	if err != nil {
		return cli.Exit(err.Error(), 3)
	}
	sc, err := compose.SlurmVia(c.String("slurm-api"), config.Rest{URL: c.String("slurm-rest-url"), User: c.String("slurm-rest-user"),
		TokenFile: c.String("slurm-rest-token-file"), Fallback: "cli"}, c.String("slurm-bin-dir"), c.String("slurm-conf"), log)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	ops := interrupt.SlurmClient{C: sc}

	var resolver sampler.JobResolver = &attrib.Resolver{}
	if simReader != nil {
		resolver = sampler.SimResolver{}
	}
	smp := sampler.New(reader, resolver, rep, sampler.Options{Interval: c.Duration("sample-interval"), Logger: log})

	var wg sync.WaitGroup
	goRun := func(f func(context.Context) error) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	goRun(smp.Run)
	if simReader != nil {
		// Simulated GPUs show the jobs Slurm runs on this node.
		goRun(func(ctx context.Context) error { return syncSimJobs(ctx, simReader, ops, node, log) })
	}
	if !c.Bool("no-imds") {
		h, err := interrupt.New(ops, rep, interrupt.Options{Node: node, InstanceID: instanceID, CheckpointRoot: c.String("checkpoint-root"),
			Signal: c.String("checkpoint-signal"), Grace: c.Duration("grace"), Reserve: c.Duration("reserve"), Logger: log,
			Announcer: &report.Announcer{URL: base + InterruptionPath, CredentialFile: c.String("credential-file")}})
		if err != nil {
			return cli.Exit(err.Error(), 2)
		}
		p := &imds.Poller{Client: imdsClient, Interval: c.Duration("imds-poll"), Handle: h.Handle, Logger: log}
		goRun(p.Run)
	}
	if after := c.Duration("dead-man-after"); after > 0 {
		if sw, err := deadManSwitch(ctx, c, imdsClient, sc, instanceID, after, log); err != nil {
			log.Warn("dead-man switch disabled", "err", err)
		} else {
			goRun(sw.Run)
		}
	}
	err = rep.Run(ctx) // returns after ctx is done, having tried a last flush
	wg.Wait()
	log.Info("burst-agent stopped", "stats", fmt.Sprintf("%+v", rep.Stats()))
	return err
}

func syncSimJobs(ctx context.Context, r *sim.Reader, ops interrupt.SlurmOps, node string, log *slog.Logger) error {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		jobs, err := ops.JobsOnNode(ctx, node)
		if err != nil {
			log.Debug("listing jobs for simulated GPUs", "err", err)
		} else {
			ids := make([]uint32, len(jobs))
			for i, j := range jobs {
				ids[i] = j.ID
			}
			if err := sampler.AssignSimJobs(r, ids); err != nil {
				log.Warn("assigning jobs to simulated GPUs", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// deadManSwitch builds the switch that terminates this instance when Slurm
// has abandoned its node (see agent/deadman).
func deadManSwitch(ctx context.Context, c *cli.Context, md *imds.Client, sc slurm.Client, instanceID string, after time.Duration, log *slog.Logger) (*deadman.Switch, error) {
	if instanceID == "" {
		return nil, errors.New("no instance id")
	}
	region := c.String("region")
	if region == "" {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := md.Region(rctx)
		cancel()
		if err != nil {
			return nil, err
		}
		region = r
	}
	api, err := compose.EC2API(ctx, ec2p.SDKOptions{Region: region, Endpoint: c.String("ec2-endpoint"), StaticCredentials: c.Bool("ec2-static-credentials")})
	if err != nil {
		return nil, err
	}
	return deadman.New(sc, deadman.EC2Terminator{API: api, InstanceID: instanceID},
		deadman.Options{Node: c.String("node"), After: after, Logger: log.With("component", "dead-man")}), nil
}
