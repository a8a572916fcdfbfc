package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/agent/attrib"
	"github.com/burst-hpc/burst/agent/credential"
	"github.com/burst-hpc/burst/agent/deadman"
	"github.com/burst-hpc/burst/agent/gpu"
	"github.com/burst-hpc/burst/agent/gpu/sim"
	"github.com/burst-hpc/burst/agent/sampler"
	"github.com/burst-hpc/burst/agent/spotwatch"
	"github.com/burst-hpc/burst/agent/telemetry"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/tlspin"
)

// Paths under --sizer-url: report batches and notices.
const (
	ReportPath       = sizerapi.PathReports
	InterruptionPath = sizerapi.PathInterruptions
)

func runCommand() *cli.Command {
	host, _ := os.Hostname()
	cmd := &cli.Command{
		Name:  "run",
		Usage: "sample GPUs, report to the sizer, handle spot interruptions (the systemd service)",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "node", Value: host, EnvVars: []string{"BURST_NODE", "BURST_NODE_NAME"}, Usage: "Slurm node name of this machine"},
			&cli.StringFlag{Name: "sizer-url", EnvVars: []string{"BURST_SIZER_URL"}, Usage: "base https URL of burst-sizer serve; reports go to <url>" + ReportPath + ", notices to <url>" + InterruptionPath + " (required)"},
			&cli.StringSliceFlag{Name: "sizer-urls", EnvVars: []string{"BURST_SIZER_URLS"}, Usage: "more sizers on the same PostgreSQL (sizer.urls), tried in turn when --sizer-url does not answer"},
			&cli.StringFlag{Name: "sizer-ca-file", Value: "/run/burst/sizer-ca.pem", EnvVars: []string{"BURST_SIZER_CA_FILE"}, Usage: "the sizer's CA certificate: the only one trusted"},
			&cli.StringFlag{Name: "credential-file", Value: "/run/burst/agent.credential", EnvVars: []string{"BURST_CREDENTIAL_FILE"}, Usage: "the node credential (from the bootstrap's identity exchange; renewed here)"},
			&cli.StringFlag{Name: "nonce-file", Value: "/var/lib/burst-agent/identity.nonce", EnvVars: []string{"BURST_NONCE_FILE"}, Usage: "the node's identity nonce (to obtain a new credential if this one expired)"},
			&cli.StringFlag{Name: "imds-endpoint", EnvVars: []string{"BURST_IMDS_ENDPOINT"}, Usage: "instance metadata endpoint (default: EC2's 169.254.169.254)"},
			&cli.BoolFlag{Name: "no-imds", EnvVars: []string{"BURST_NO_IMDS"}, Usage: "do not poll instance metadata (not on EC2 / not spot)"},
			&cli.DurationFlag{Name: "imds-poll", Value: 2 * time.Second, EnvVars: []string{"BURST_IMDS_POLL"}, Usage: "instance metadata poll interval"},
			&cli.StringFlag{Name: "instance-id", EnvVars: []string{"BURST_INSTANCE_ID"}, Usage: "EC2 instance id (default: read from instance metadata)"},
			&cli.DurationFlag{Name: "sample-interval", Value: time.Second, EnvVars: []string{"BURST_SAMPLE_INTERVAL"}, Usage: "GPU sampling interval"},
			&cli.DurationFlag{Name: "interval", Value: 15 * time.Second, EnvVars: []string{"BURST_REPORT_INTERVAL"}, Usage: "report interval (batches are sent this often)"},
			&cli.StringFlag{Name: "state-dir", Value: "/var/lib/burst-agent", EnvVars: []string{"BURST_STATE_DIR"}, Usage: "directory of the on-disk report buffer"},
			&cli.Int64Flag{Name: "buffer-max-bytes", Value: 64 << 20, EnvVars: []string{"BURST_BUFFER_MAX_BYTES"}, Usage: "cap of the on-disk report buffer; the oldest records are dropped (and counted) beyond it"},
			&cli.StringFlag{Name: "gpu-source", Value: "nvml", EnvVars: []string{"BURST_GPU_SOURCE"}, Usage: "nvml (real GPUs; if NVML fails the agent drains the node with the reason and exits 3) or sim (simulated GPUs for demos and tests: reports say so and the sizer does not learn from them)"},
			&cli.BoolFlag{Name: "attribute-environ", EnvVars: []string{"BURST_ATTRIBUTE_ENVIRON"}, Usage: "attribute a GPU process in no Slurm job cgroup to the SLURM_JOB_ID in its environment (sites without proctrack/task cgroup; any user can forge it, so usage figures become a claim)"},
			&cli.IntFlag{Name: "sim-gpus", Value: 8, EnvVars: []string{"BURST_SIM_GPUS"}, Usage: "number of simulated GPUs"},
			&cli.IntFlag{Name: "sim-memory-percent", EnvVars: []string{"BURST_SIM_MEMORY_PERCENT"}, Usage: "simulated GPUs: memory a job uses, % of each GPU (0: follows the utilisation curve)"},
			&cli.Uint64Flag{Name: "sim-seed", Value: 1, EnvVars: []string{"BURST_SIM_SEED"}, Usage: "seed of the simulated utilisation curves"},
			&cli.StringFlag{Name: "checkpoint-root", Value: "/fsx/burst/checkpoints", EnvVars: []string{"BURST_CHECKPOINT_ROOT"}, Usage: "jobs checkpoint into <root>/<job id> ($BURST_CHECKPOINT_DIR)"},
			&cli.StringFlag{Name: "checkpoint-signal", Value: "USR1", EnvVars: []string{"BURST_CHECKPOINT_SIGNAL"}, Usage: "default checkpoint signal, sent to the batch shell"},
			&cli.DurationFlag{Name: "grace", Value: 90 * time.Second, EnvVars: []string{"BURST_CHECKPOINT_GRACE"}, Usage: "longest wait for a job's checkpoint marker after the signal"},
			&cli.DurationFlag{Name: "reserve", Value: 20 * time.Second, EnvVars: []string{"BURST_CHECKPOINT_RESERVE"}, Usage: "time kept before EC2's deadline to requeue jobs and hand the node back"},
			&cli.StringFlag{Name: "slurm-bin-dir", Value: "/usr/bin", EnvVars: []string{"BURST_SLURM_BIN_DIR"}, Usage: "directory of scontrol, squeue, scancel"},
			&cli.StringFlag{Name: "slurm-conf", EnvVars: []string{"SLURM_CONF"}, Usage: "slurm.conf for the Slurm commands"},
			&cli.StringFlag{Name: "slurm-api", Value: "cli", EnvVars: []string{"BURST_AGENT_SLURM_API"}, Usage: "cli (the Slurm commands: a node has them and munge) or rest (slurmrestd, with --slurm-rest-url and --slurm-rest-token-file)"},
			&cli.StringFlag{Name: "slurm-rest-url", EnvVars: []string{"BURST_AGENT_SLURM_REST_URL"}, Usage: "slurmrestd's https://host:port (with --slurm-rest-ca-file) or unix:/path (--slurm-api rest); plain http is refused: it would carry the token in clear text"},
			&cli.StringFlag{Name: "slurm-rest-ca-file", EnvVars: []string{"BURST_AGENT_SLURM_REST_CA_FILE"}, Usage: "PEM file of the CA that signed slurmrestd's certificate (https; nothing else is trusted)"},
			&cli.StringFlag{Name: "slurm-rest-token-file", EnvVars: []string{"BURST_AGENT_SLURM_REST_TOKEN_FILE"}, Usage: "file with a Slurm JWT (scontrol token) of a user that may requeue jobs and drain nodes, mode 0600, re-read when it changes (--slurm-api rest; nodes never get the JWT key)"},
			&cli.StringFlag{Name: "slurm-rest-user", EnvVars: []string{"BURST_AGENT_SLURM_REST_USER"}, Usage: "X-SLURM-USER-NAME (default: the token's user)"},
			&cli.DurationFlag{Name: "dead-man-after", Value: 15 * time.Minute, EnvVars: []string{"BURST_DEAD_MAN_AFTER"}, Usage: "power this instance off (which terminates it) after its node has been powered down or down in Slurm, or the controller unreachable, this long (0 disables)"},
			&cli.DurationFlag{Name: "dead-man-poll", Value: 30 * time.Second, EnvVars: []string{"BURST_DEAD_MAN_POLL"}, Usage: "how often the dead-man switch looks at the node in Slurm"},
			&cli.StringFlag{Name: "poweroff-command", Value: "/usr/bin/systemctl poweroff", EnvVars: []string{"BURST_POWEROFF_COMMAND"}, Usage: "the dead-man switch's command (no shell; split on spaces)"},
			&cli.DurationFlag{Name: "test-clock-offset", EnvVars: []string{"BURST_TEST_CLOCK_OFFSET"}, Hidden: true, Usage: "shift this agent's clock by this much where it compares its time with the sizer's or EC2's (test only: a node clock off from the head node's)"},
			&cli.StringFlag{Name: "emu-shutdown-url", EnvVars: []string{"BURST_EMU_SHUTDOWN_URL"}, Usage: "the EC2 emulator's shutdown control URL for this instance, in place of the poweroff command (test only)"},
			&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"BURST_LOG_LEVEL"}, Usage: "debug, info, warn or error"},
		}, imdsGuardFlags()...),
		Action: runAgent,
	}
	cmd.Flags = append(cmd.Flags, healthFlags()...)
	return cmd
}

// runConfig checks the flags, reporting every problem at once.
func runConfig(c *cli.Context) error {
	var errs []error
	if c.String("node") == "" {
		errs = append(errs, errors.New("--node: empty; set the Slurm node name"))
	}
	if u := c.String("sizer-url"); u == "" {
		errs = append(errs, errors.New("--sizer-url (BURST_SIZER_URL): required, e.g. https://head:8472"))
	} else if p, err := url.Parse(u); err != nil || p.Scheme != "https" || p.Host == "" {
		errs = append(errs, fmt.Errorf("--sizer-url %q: want an https://host[:port] URL (the sizer serves HTTPS only)", u))
	}
	for _, u := range c.StringSlice("sizer-urls") {
		if p, err := url.Parse(u); err != nil || p.Scheme != "https" || p.Host == "" {
			errs = append(errs, fmt.Errorf("--sizer-urls %q: want https://host[:port] URLs (the sizer serves HTTPS only)", u))
		}
	}
	switch c.String("gpu-source") {
	case "nvml", "sim":
	default:
		errs = append(errs, fmt.Errorf("--gpu-source %q: want nvml (real GPUs) or sim (simulated, for demos and tests)", c.String("gpu-source")))
	}
	if p := c.Int("sim-memory-percent"); p < 0 || p > 100 {
		errs = append(errs, fmt.Errorf("--sim-memory-percent %d: want 0..100", p))
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
	if _, _, herrs := healthSettings(c.String("gpu-health")); len(herrs) > 0 {
		errs = append(errs, herrs...)
	}
	if c.String("sim-fault-file") != "" && c.String("gpu-source") != "sim" {
		errs = append(errs, errors.New("--sim-fault-file: only with --gpu-source sim (faults are injected into simulated GPUs only)"))
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

// openGPUs opens the GPU source: NVML, or simulated GPUs only when asked
// (--gpu-source sim). A failing NVML is an error, never a fallback: the
// sizer must not learn from made-up readings that look real.
func openGPUs(source string, so sim.Options) (gpu.Reader, *sim.Reader, error) {
	if source == "sim" {
		s, err := sim.New(so)
		return s, s, err
	}
	r, err := gpu.Open()
	if err != nil {
		return nil, nil, err
	}
	return r, nil, nil
}

// drainForGPUs takes the node out of service with the reason when its GPUs
// cannot be read (a node whose GPUs the agent cannot see must not run GPU
// jobs, and the admin sees why in sinfo -R).
func drainForGPUs(ctx context.Context, sc slurm.Client, node string, cause error, log *slog.Logger) {
	reason := "burst-agent: cannot read GPUs through NVML: " + cause.Error()
	if len(reason) > 120 {
		reason = reason[:117] + "..."
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sc.UpdateNodes(dctx, slurm.NodeUpdate{Names: []string{node}, State: "DRAIN", Reason: reason}); err != nil {
		log.Error("draining the node after the GPU failure", "err", err)
		return
	}
	log.Error("drained the node: its GPUs cannot be read", "reason", reason)
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
	instanceID := readInstanceID(ctx, c, imdsClient, log)
	log = log.With("instance_id", instanceID)
	shape := readInstanceShape(ctx, c, imdsClient)
	sc, err := compose.SlurmVia(c.String("slurm-api"), config.Rest{URL: c.String("slurm-rest-url"), CAFile: c.String("slurm-rest-ca-file"), User: c.String("slurm-rest-user"),
		TokenFile: c.String("slurm-rest-token-file"), Fallback: "cli"}, c.String("slurm-bin-dir"), c.String("slurm-conf"), log)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	source := c.String("gpu-source")
	reader, simReader, err := openGPUs(source, sim.Options{GPUs: shape.gpus, Seed: c.Uint64("sim-seed"), MemoryTotalBytes: shape.memBytes, MemoryUsedPercent: c.Int("sim-memory-percent"),
		Name: simName(shape.model), FaultFile: c.String("sim-fault-file")})
	if err != nil {
		if source == "nvml" {
			drainForGPUs(ctx, sc, node, err, log)
		}
		return cli.Exit(fmt.Sprintf("opening GPUs: %v", err), 3)
	}
	defer reader.Close()
	devs, _ := reader.Devices()
	gpuSource := sizerapi.GPUSourceNVML
	if simReader != nil {
		gpuSource = sizerapi.GPUSourceSim
	}
	log.Info("burst-agent starting", "gpus", len(devs), "gpu_source", gpuSource)

	sz, err := dialSizer(c)
	if err != nil {
		return err
	}
	sink := &telemetry.HTTPSink{URL: sz.base + ReportPath, Fallbacks: sz.under(ReportPath), CredentialFile: c.String("credential-file"), Client: sz.hc}
	rep, err := telemetry.New(sink, telemetry.Options{Node: node, InstanceID: instanceID, GPUSource: gpuSource, Dir: filepath.Clean(c.String("state-dir")),
		Interval: c.Duration("interval"), Spool: telemetry.SpoolOptions{MaxBytes: c.Int64("buffer-max-bytes")}, Logger: log})
	if err != nil {
		return cli.Exit(err.Error(), 3)
	}
	ops := spotwatch.SlurmClient{C: sc}
	now := time.Now
	if off := c.Duration("test-clock-offset"); off != 0 {
		log.Warn("TEST SWITCH: this agent's clock is shifted (credential renewal, spot notices)", "offset", off)
		now = func() time.Time { return time.Now().Add(off) }
	}

	var resolver sampler.JobResolver = &attrib.Resolver{AllowEnviron: c.Bool("attribute-environ")}
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
	if err := startLoops(c, goRun, agentParts{node: node, instanceID: instanceID, instanceType: shape.instanceType, log: log, md: imdsClient,
		sc: sc, ops: ops, reader: reader, sim: simReader, rep: rep, sizer: sz, now: now}); err != nil {
		return err
	}
	err = rep.Run(ctx) // returns after ctx is done, having tried a last flush
	wg.Wait()
	log.Info("burst-agent stopped", "stats", fmt.Sprintf("%+v", rep.Stats()))
	return err
}

// readInstanceID asks the IMDS for the instance id unless --instance-id
// names it or --no-imds is set.
func readInstanceID(ctx context.Context, c *cli.Context, md *imds.Client, log *slog.Logger) string {
	instanceID := c.String("instance-id")
	if instanceID == "" && !c.Bool("no-imds") {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		id, err := md.InstanceID(ictx)
		cancel()
		if err != nil {
			log.Warn("cannot read the instance id; reports carry none", "err", err)
		}
		instanceID = id
	}
	return instanceID
}

// instanceShape is the instance type and the simulated GPUs' shape.
type instanceShape struct {
	gpus         int
	memBytes     uint64
	model        string
	instanceType string
}

// readInstanceShape reads the instance type from the IMDS. Simulated GPUs
// take the instance type's shape from the catalog, so the sizer's feedback
// store sees plausible memory figures.
func readInstanceShape(ctx context.Context, c *cli.Context, md *imds.Client) instanceShape {
	s := instanceShape{gpus: c.Int("sim-gpus")}
	if !c.Bool("no-imds") {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if typ, err := md.InstanceType(tctx); err == nil {
			s.instanceType = typ
			if t, ok := catalog.Default().Lookup(typ); ok && t.GPUs > 0 && !c.IsSet("sim-gpus") {
				s.gpus, s.memBytes, s.model = t.GPUs, uint64(t.GPUMemoryMiB)<<20, t.GPUModel
			}
		}
		cancel()
	}
	return s
}

// sizerConn is how the agent reaches the sizer: its URL, the fallbacks,
// the pinned CA and the client that trusts it.
type sizerConn struct {
	base string
	more []string
	ca   []byte
	hc   *http.Client
}

// under is path under each fallback URL.
func (s sizerConn) under(path string) []string {
	var out []string
	for _, u := range s.more {
		out = append(out, u+path)
	}
	return out
}

func dialSizer(c *cli.Context) (sizerConn, error) {
	s := sizerConn{base: strings.TrimRight(c.String("sizer-url"), "/")}
	for _, u := range c.StringSlice("sizer-urls") {
		s.more = append(s.more, strings.TrimRight(u, "/"))
	}
	ca, err := os.ReadFile(c.String("sizer-ca-file"))
	if err != nil {
		return s, cli.Exit(fmt.Sprintf("reading the sizer CA: %v", err), 2)
	}
	s.ca = ca
	hc, err := tlspin.HTTPClient(ca, 10*time.Second)
	if err != nil {
		return s, cli.Exit(fmt.Sprintf("%s: %v", c.String("sizer-ca-file"), err), 2)
	}
	s.hc = hc
	return s, nil
}

// agentParts are what the agent's background loops share.
type agentParts struct {
	node, instanceID, instanceType string
	log                            *slog.Logger
	md                             *imds.Client
	sc                             slurm.Client
	ops                            spotwatch.SlurmClient
	reader                         gpu.Reader
	sim                            *sim.Reader
	rep                            *telemetry.Reporter
	sizer                          sizerConn
	now                            func() time.Time
}

// startLoops starts the loops beside the sampler: simulated jobs, spot
// notices, GPU health, credential renewal, the IMDS guard, the dead-man
// switch.
func startLoops(c *cli.Context, goRun func(func(context.Context) error), p agentParts) error {
	log, node := p.log, p.node
	if p.sim != nil {
		// Simulated GPUs show the jobs Slurm runs on this node.
		goRun(func(ctx context.Context) error { return syncSimJobs(ctx, p.sim, p.ops, node, log) })
	}
	if !c.Bool("no-imds") {
		h, err := spotwatch.New(p.ops, p.rep, spotwatch.Options{Node: node, InstanceID: p.instanceID, CheckpointRoot: c.String("checkpoint-root"),
			Signal: c.String("checkpoint-signal"), Grace: c.Duration("grace"), Reserve: c.Duration("reserve"), Now: p.now, Logger: log,
			Announcer: &telemetry.Announcer{URL: p.sizer.base + InterruptionPath, Fallbacks: p.sizer.under(InterruptionPath), CredentialFile: c.String("credential-file"), Client: p.sizer.hc}})
		if err != nil {
			return cli.Exit(err.Error(), 2)
		}
		poller := &imds.Poller{Client: p.md, Interval: c.Duration("imds-poll"), Handle: h.Handle, Logger: log}
		goRun(poller.Run)
	}
	classType := p.instanceType
	if p.sim != nil && c.IsSet("sim-gpus") {
		classType = "" // simulated GPUs counted by hand: no class to check them against
	}
	mon, err := healthMonitor(c, healthDeps{reader: p.reader, ops: p.ops, rec: p.rep, node: node, id: p.instanceID, instanceType: classType, log: log})
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if mon != nil {
		goRun(mon.Run)
	}
	goRun(renewer(c, p.sizer.base, p.sizer.more, p.sizer.ca, p.md, p.now, log).Run)
	if fw := c.String("imds-firewall"); strings.TrimSpace(fw) != "" {
		g, err := imdsGuard(c, fw, p.sc, node, log)
		if err != nil {
			return cli.Exit(err.Error(), 2)
		}
		goRun(g.Run)
	}
	if after := c.Duration("dead-man-after"); after > 0 {
		var off deadman.Terminator = deadman.PowerOff{Argv: strings.Fields(c.String("poweroff-command"))}
		if u := c.String("emu-shutdown-url"); u != "" {
			log.Warn("TEST SWITCH: the dead-man switch posts the EC2 emulator's shutdown URL instead of powering off", "url", u)
			off = deadman.EmulatorShutdown{URL: u}
		}
		sw := deadman.New(p.sc, off, deadman.Options{Node: node, After: after, Poll: c.Duration("dead-man-poll"), Logger: log.With("component", "dead-man")})
		goRun(sw.Run)
	}
	return nil
}

func syncSimJobs(ctx context.Context, r *sim.Reader, ops spotwatch.SlurmOps, node string, log *slog.Logger) error {
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

// renewer keeps the node credential alive (agent/credential).
func renewer(c *cli.Context, base string, more []string, ca []byte, md *imds.Client, now func() time.Time, log *slog.Logger) *credential.Renewer {
	return credential.New(credential.Options{
		Node: c.String("node"), File: c.String("credential-file"), NonceFile: c.String("nonce-file"), Now: now, Logger: log.With("component", "credential"),
		Client: func(tok string) (credential.Sizer, error) {
			return sizerclient.New(base, tok, sizerclient.WithCA(ca), sizerclient.WithTimeout(20*time.Second), sizerclient.WithFallbackURLs(more...))
		},
		Identity: func(ctx context.Context) ([]byte, []byte, error) {
			return md.SignedIdentity(ctx, sizerapi.IdentityRSA2048)
		},
	})
}
