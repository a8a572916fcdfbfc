package simulate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/warmpool/forecast"
	"github.com/burst-hpc/burst/sizer/trace"
)

// Command is `burst-sizer simulate`: replay a trace through the static,
// idle-timeout and burst policies and print the cost table (or JSON), an
// SVG chart, or a sensitivity sweep. Register it with
// `Commands: []*cli.Command{..., simulate.Command()}`.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "simulate",
		Usage: "replay a job trace through static, idle-timeout and burst provisioning and compare cost and wait",
		Description: `Discrete-event simulation of a GPU job trace (Philly CSV, burst's simple CSV
submit,duration,gpus[,gpu_model][,metadata], sacct --parsable2 output, or the
Alibaba GPU traces: cluster-trace-gpu-v2023 openb_pod_list_*.csv and
cluster-trace-gpu-v2025 disaggregated_DLRM_trace.csv).
Prices and spot savings come from the embedded EC2 catalog; burst's choices
(class, instance type, spot or on-demand) come from the sizing policy.
Deterministic for a given --seed.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "trace", Usage: "trace `FILE` (- for stdin); required"},
			&cli.StringFlag{Name: "format", Value: trace.FormatAuto, Usage: "trace format: " + strings.Join(trace.Formats, ", ")},
			&cli.BoolFlag{Name: "skip-bad", Usage: "skip malformed trace rows (counted) instead of failing on the first"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of the table"},
			&cli.StringFlag{Name: "svg", Usage: "write a chart of cumulative cost and GPUs billed to `FILE`"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "random seed (boot times, dry pools, interruptions)"},
			&cli.StringSliceFlag{Name: "policies", Usage: "policies to simulate (default all: static, idle-timeout, burst)"},
			&cli.StringFlag{Name: "gpu-model", Value: DefaultGPUModel, Usage: "GRES type for jobs whose trace names no GPU (Philly ran P100/P40; a10g is the catalog's 24 GB-class stand-in)"},
			&cli.DurationFlag{Name: "boot-median", Value: DefaultBootMedian, Usage: "median launch-to-Slurm-ready time"},
			&cli.Float64Flag{Name: "boot-sigma", Value: DefaultBootSigma, Usage: "lognormal sigma of boot times; 0 for a fixed boot time"},
			&cli.DurationFlag{Name: "idle-timeout", Value: DefaultIdleTimeout, Usage: "idle-timeout policy's scale-down time (ParallelCluster default 10m)"},
			&cli.DurationFlag{Name: "warm-window", Value: DefaultWarmWindow, Usage: "burst's warm reuse window after a job ends; 0 releases at once"},
			&cli.DurationFlag{Name: "sched-delay", Value: DefaultSchedDelay, Usage: "Slurm's delay from nodes up to job running, paid by every job (a warm hit pays only this); 0 for none"},
			&cli.BoolFlag{Name: "warm-pool", Value: true, Usage: "burst keeps warm nodes per class by the forecast (internal/warmpool/forecast); --warm-pool=false for the reuse window only"},
			&cli.Float64Flag{Name: "warm-quantile", Value: forecast.DefaultQuantile, Usage: "warm pool: keep this quantile of the Poisson node demand of one lead time"},
			&cli.BoolFlag{Name: "warm-miss-feedback", Value: true, Usage: "warm pool: raise a class's quantile while more than 1-q of its jobs find no warm node (--warm-miss-feedback=false: always --warm-quantile)"},
			&cli.DurationFlag{Name: "warm-half-life", Value: forecast.DefaultHalfLife, Usage: "warm pool: half-life of the recent arrival rate"},
			&cli.Float64Flag{Name: "warm-profile-weight", Value: forecast.DefaultProfileWeight, Usage: "warm pool: weight of the hour-of-week profile against the recent rate (0..1)"},
			&cli.Float64Flag{Name: "warm-cap", Value: DefaultWarmCapUSDPerDay, Usage: "warm pool: hard cap per class in USD per day (0: the pool holds nothing)"},
			&cli.DurationFlag{Name: "warm-lead", Usage: "warm pool: replenishment lead time the forecast covers (default: --boot-median)"},
			&cli.StringFlag{Name: "checkpoint", Value: DefaultCheckpoint.String(), Usage: "checkpoint interval of jobs without checkpoint= metadata, or none"},
			&cli.BoolFlag{Name: "checkpoint-on-notice", Usage: "jobs checkpoint within the 2-minute spot notice (burst-agent's signal): interruptions lose no work"},
			&cli.StringFlag{Name: "interruptions", Value: "advisor", Usage: "spot interruption model: advisor (Spot Advisor bucket per type), bamboo:FILE (measured removals per node-hour), or a rate per node-hour"},
			&cli.IntFlag{Name: "zones", Value: 1, Usage: "availability zones burst launches in; each zone's spot pool is a separate offering with its own dry draw"},
			&cli.BoolFlag{Name: "avoid-interrupted-pool", Usage: "a requeued job's relaunch treats the spot pool that reclaimed it as unavailable"},
			&cli.Float64Flag{Name: "spot-dry", Value: DefaultSpotDryProb, Usage: "probability a spot launch finds the pool dry and falls back to the next offering"},
			&cli.IntFlag{Name: "max-spot-interruptions", Value: DefaultMaxSpotInterruptions, Usage: "after this many interruptions in a row without a checkpoint saved, a job relaunches on-demand; -1 never"},
			&cli.StringFlag{Name: "static-type", Usage: "instance type of the static cluster (default: cheapest 8-GPU type of --gpu-model)"},
			&cli.Float64Flag{Name: "static-percentile", Value: DefaultStaticPercentile, Usage: "static cluster covers this quantile of concurrent GPU demand"},
			&cli.IntFlag{Name: "reserved", Usage: "reserved nodes (an ODCR or a Capacity Block) burst uses before spot and on-demand; adds a burst+reserved row and its saving against none"},
			&cli.StringFlag{Name: "reserved-type", Usage: "instance type of the reserved nodes (default: cheapest 8-GPU type of --gpu-model)"},
			&cli.StringFlag{Name: "reserved-kind", Value: ReservationODCR, Usage: "reservation kind: " + ReservationODCR + " (billed at the on-demand rate, used or not) or " + ReservationBlock + " (prepaid; give --reserved-usd-per-hour)"},
			&cli.Float64Flag{Name: "reserved-usd-per-hour", Usage: "reservation price per instance-hour (default for odcr: the type's on-demand price; required for capacity-block)"},
			&cli.BoolFlag{Name: "sweep", Usage: "run the sensitivity sweep (burst vs idle-timeout over boot time, interruption rate, checkpoint interval)"},
			&cli.StringFlag{Name: "sweep-boot", Value: "1m,2m,5m,10m", Usage: "boot medians for --sweep"},
			&cli.StringFlag{Name: "sweep-interruptions", Value: "advisor,0.1,0.61,2,5", Usage: "interruption models for --sweep (advisor, bamboo:FILE or rates per node-hour)"},
			&cli.StringFlag{Name: "sweep-checkpoint", Value: "10m,30m,2h,none", Usage: "checkpoint intervals for --sweep"},
			&cli.StringFlag{Name: "sweep-warm-cap", Usage: "warm pool caps (USD per class per day) for --sweep; off for no pool (default: --warm-cap only)"},
			&cli.StringFlag{Name: "sweep-warm-quantile", Usage: "warm pool quantiles for --sweep (default: --warm-quantile only)"},
		},
		Action:      runCommand,
		Subcommands: []*cli.Command{learningCommand(), convertSacctCommand()},
	}
}

// convertSacctCommand is `simulate convert-sacct`.
func convertSacctCommand() *cli.Command {
	return &cli.Command{
		Name:      "convert-sacct",
		Usage:     "convert `" + trace.SacctCommand + "` output into the simple trace CSV",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "in", Value: "-", Usage: "sacct output `FILE` (- for stdin)"},
			&cli.StringFlag{Name: "out", Value: "-", Usage: "CSV `FILE` to write (- for stdout)"},
			&cli.BoolFlag{Name: "skip-bad", Usage: "skip malformed rows (counted) instead of failing"},
		},
		Action: func(c *cli.Context) error {
			in, closeIn, err := openIn(c.String("in"))
			if err != nil {
				return err
			}
			defer closeIn()
			var buf strings.Builder
			rep, err := trace.ConvertSacct(in, &buf, trace.ReadOptions{SkipBad: c.Bool("skip-bad")})
			if err != nil {
				return fmt.Errorf("converting %s: %w", c.String("in"), err)
			}
			if err := writeOut(c.String("out"), c.App.Writer, buf.String()); err != nil {
				return err
			}
			slog.Info("converted sacct output", "rows", rep.Rows, "jobs", rep.Jobs, "ignored_not_gpu_or_unfinished", rep.Ignored, "skipped_bad", rep.Skipped)
			return nil
		},
	}
}

func openIn(path string) (io.Reader, func(), error) {
	if path == "-" {
		return os.Stdin, func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening trace: %w", err)
	}
	return f, func() { f.Close() }, nil
}

func writeOut(path string, stdout io.Writer, s string) error {
	if path == "-" || path == "" {
		_, err := io.WriteString(stdout, s)
		return err
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ParseCheckpoint reads a checkpoint interval: a duration, or "none"
// (returned as -1).
func ParseCheckpoint(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "none" || s == "never" {
		return -1, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("checkpoint %q: want a positive duration like 30m, or none", s)
	}
	return d, nil
}

// ParseInterruptions reads an interruption model: "advisor",
// "bamboo:FILE" (removals per node-hour measured in a bamboo trace, read
// through open) or a number of interruptions per node-hour.
func ParseInterruptions(s string, open func(string) (io.ReadCloser, error)) (InterruptModel, error) {
	s = strings.TrimSpace(s)
	if s == "advisor" {
		return AdvisorRate{}, nil
	}
	if file, ok := strings.CutPrefix(s, "bamboo:"); ok {
		f, err := open(file)
		if err != nil {
			return nil, fmt.Errorf("interruptions %q: opening the bamboo trace: %w", s, err)
		}
		defer f.Close()
		evs, err := trace.ReadBamboo(f)
		if err != nil {
			return nil, fmt.Errorf("interruptions %q: %w", s, err)
		}
		rate, err := trace.RemovalRate(evs)
		if err != nil {
			return nil, fmt.Errorf("interruptions %q: %w", s, err)
		}
		return PoissonRate{PerNodeHour: rate, Source: "bamboo " + filepath.Base(file)}, nil
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || r < 0 || r > 1000 {
		return nil, fmt.Errorf("interruptions %q: want advisor, bamboo:FILE, or a rate per node-hour between 0 and 1000", s)
	}
	return PoissonRate{PerNodeHour: r}, nil
}

func openFile(p string) (io.ReadCloser, error) { return os.Open(p) }

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// optionsFromFlags gathers every flag problem at once.
func optionsFromFlags(c *cli.Context) (Options, error) {
	var errs []error
	o := Options{
		Seed:                 c.Uint64("seed"),
		Policies:             c.StringSlice("policies"),
		GPUModel:             c.String("gpu-model"),
		BootMedian:           c.Duration("boot-median"),
		BootSigma:            c.Float64("boot-sigma"),
		IdleTimeout:          c.Duration("idle-timeout"),
		WarmWindow:           c.Duration("warm-window"),
		CheckpointOnNotice:   c.Bool("checkpoint-on-notice"),
		AvoidInterruptedPool: c.Bool("avoid-interrupted-pool"),
		SpotDryProb:          c.Float64("spot-dry"),
		MaxSpotInterruptions: c.Int("max-spot-interruptions"),
		StaticType:           c.String("static-type"),
		StaticPercentile:     c.Float64("static-percentile"),
		SchedDelay:           c.Duration("sched-delay"),
		Reserved: Reservation{
			Kind: c.String("reserved-kind"), Type: c.String("reserved-type"),
			Nodes: c.Int("reserved"), USDPerHour: c.Float64("reserved-usd-per-hour"),
		},
		Warm: WarmOptions{
			Disabled:      !c.Bool("warm-pool"),
			Quantile:      c.Float64("warm-quantile"),
			FixedQuantile: !c.Bool("warm-miss-feedback"),
			HalfLife:      c.Duration("warm-half-life"),
			ProfileWeight: c.Float64("warm-profile-weight"),
			CapUSDPerDay:  c.Float64("warm-cap"),
			LeadTime:      c.Duration("warm-lead"),
		},
	}
	zones, err := zonesFromFlag(c.Int("zones"))
	if err != nil {
		errs = append(errs, err)
	}
	o.Zones = zones
	if len(o.Policies) == 1 {
		o.Policies = splitList(o.Policies[0])
	}
	noneFromZero(&o)
	errs = append(errs, rangeProblems(c, o)...)
	ck, err := ParseCheckpoint(c.String("checkpoint"))
	if err != nil {
		errs = append(errs, fmt.Errorf("--checkpoint: %w", err))
	}
	o.Checkpoint = ck
	im, err := ParseInterruptions(c.String("interruptions"), openFile)
	if err != nil {
		errs = append(errs, fmt.Errorf("--interruptions: %w", err))
	}
	o.Interruptions = im
	errs = append(errs, reservedProblems(c)...)
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	return o, nil
}

// zonesFromFlag is --zones as the zones burst launches in (nil for one).
func zonesFromFlag(z int) ([]string, error) {
	if z < 1 || z > 26 {
		return nil, fmt.Errorf("--zones %d: want 1 to 26", z)
	}
	var zones []string
	if z > 1 {
		for i := range z {
			zones = append(zones, catalog.PriceRegion+string(rune('a'+i)))
		}
	}
	return zones, nil
}

// noneFromZero: flags say 0 for "none"/"fixed"; Options use negatives for
// that.
func noneFromZero(o *Options) {
	if o.BootSigma == 0 {
		o.BootSigma = -1
	}
	if o.WarmWindow == 0 {
		o.WarmWindow = -1
	}
	if o.SpotDryProb == 0 {
		o.SpotDryProb = -1
	}
	if o.SchedDelay == 0 {
		o.SchedDelay = -1
	}
	if o.Warm.ProfileWeight == 0 {
		o.Warm.ProfileWeight = -1
	}
	if o.Warm.CapUSDPerDay == 0 {
		o.Warm.CapUSDPerDay = -1
	}
}

// rangeProblems are the times, probabilities and prices out of range.
func rangeProblems(c *cli.Context, o Options) []error {
	var errs []error
	if c.Duration("sched-delay") < 0 {
		errs = append(errs, fmt.Errorf("--sched-delay %v: want a duration >= 0", c.Duration("sched-delay")))
	}
	if q := c.Float64("warm-quantile"); !(q > 0 && q < 1) {
		errs = append(errs, fmt.Errorf("--warm-quantile %g: want a number between 0 and 1", q))
	}
	if w := c.Float64("warm-profile-weight"); !(w >= 0 && w <= 1) {
		errs = append(errs, fmt.Errorf("--warm-profile-weight %g: want a number from 0 to 1", w))
	}
	if h := c.Duration("warm-half-life"); h <= 0 {
		errs = append(errs, fmt.Errorf("--warm-half-life %v: want a positive duration", h))
	}
	if v := c.Float64("warm-cap"); !(v >= 0) || math.IsInf(v, 0) {
		errs = append(errs, fmt.Errorf("--warm-cap %g: want USD per day >= 0", v))
	}
	if d := c.Duration("warm-lead"); d < 0 {
		errs = append(errs, fmt.Errorf("--warm-lead %v: want a duration > 0 (or leave it out for --boot-median)", d))
	}
	if o.BootMedian <= 0 {
		errs = append(errs, fmt.Errorf("--boot-median %v: want a positive duration", o.BootMedian))
	}
	if o.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("--idle-timeout %v: want a duration >= 0", o.IdleTimeout))
	}
	if o.IdleTimeout == 0 {
		errs = append(errs, errors.New("--idle-timeout 0: the idle-timeout baseline needs a positive timeout"))
	}
	if o.WarmWindow < -1 {
		errs = append(errs, fmt.Errorf("--warm-window %v: want a duration >= 0", c.Duration("warm-window")))
	}
	if o.SpotDryProb < -1 {
		errs = append(errs, fmt.Errorf("--spot-dry %g: want a probability in [0,1]", c.Float64("spot-dry")))
	}
	return errs
}

// reservedProblems are --reserved's and --max-spot-interruptions' problems.
func reservedProblems(c *cli.Context) []error {
	var errs []error
	if n := c.Int("reserved"); n < 0 {
		errs = append(errs, fmt.Errorf("--reserved %d: want a number of nodes >= 0", n))
	}
	if n := c.Int("reserved"); n == 0 && (c.IsSet("reserved-type") || c.IsSet("reserved-usd-per-hour") || c.IsSet("reserved-kind")) {
		errs = append(errs, errors.New("--reserved-type, --reserved-kind and --reserved-usd-per-hour need --reserved N (nodes)"))
	}
	if c.Int("max-spot-interruptions") == 0 {
		errs = append(errs, errors.New("--max-spot-interruptions 0: use 1 or more, or -1 for never"))
	}
	return errs
}

func sweepFromFlags(c *cli.Context) (SweepSpec, error) {
	var spec SweepSpec
	var errs []error
	for _, s := range splitList(c.String("sweep-boot")) {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("--sweep-boot %q: want positive durations like 2m", s))
			continue
		}
		spec.BootMedians = append(spec.BootMedians, d)
	}
	for _, s := range splitList(c.String("sweep-interruptions")) {
		im, err := ParseInterruptions(s, openFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--sweep-interruptions: %w", err))
			continue
		}
		if p, ok := im.(PoissonRate); ok && p.PerNodeHour == 0.61 && p.Source == "" {
			p.Source = "bamboo p3"
			im = p
		}
		spec.Interruptions = append(spec.Interruptions, im)
	}
	for _, s := range splitList(c.String("sweep-checkpoint")) {
		d, err := ParseCheckpoint(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--sweep-checkpoint: %w", err))
			continue
		}
		spec.Checkpoints = append(spec.Checkpoints, d)
	}
	for _, f := range splitList(c.String("sweep-warm-cap")) {
		if f == "off" {
			spec.WarmCaps = append(spec.WarmCaps, -1)
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v >= 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("--sweep-warm-cap %q: want USD per day >= 0, or off", f))
			continue
		}
		spec.WarmCaps = append(spec.WarmCaps, v)
	}
	for _, f := range splitList(c.String("sweep-warm-quantile")) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0 && v < 1) {
			errs = append(errs, fmt.Errorf("--sweep-warm-quantile %q: want a number between 0 and 1", f))
			continue
		}
		spec.WarmQuantiles = append(spec.WarmQuantiles, v)
	}
	if len(spec.BootMedians) == 0 || len(spec.Interruptions) == 0 || len(spec.Checkpoints) == 0 {
		errs = append(errs, errors.New("--sweep needs at least one value each in --sweep-boot, --sweep-interruptions and --sweep-checkpoint"))
	}
	return spec, errors.Join(errs...)
}

func runCommand(c *cli.Context) error {
	if c.NArg() > 0 {
		return cmdline.Usagef("simulate takes no arguments (got %q); give the trace with --trace FILE", c.Args().Slice())
	}
	if c.String("trace") == "" {
		return cmdline.Usagef("simulate needs --trace FILE (Philly CSV, simple CSV or sacct output; see --help)")
	}
	if f := c.String("format"); !slices.Contains(trace.Formats, f) {
		return cmdline.Usagef("--format %q is unknown; want one of %s", f, strings.Join(trace.Formats, ", "))
	}
	o, err := optionsFromFlags(c)
	if err != nil {
		return cmdline.Usage(fmt.Errorf("checking flags: %w", err))
	}
	in, closeIn, err := openIn(c.String("trace"))
	if err != nil {
		return err
	}
	defer closeIn()
	jobs, rep, err := trace.ReadAny(in, c.String("format"), trace.ReadOptions{SkipBad: c.Bool("skip-bad")})
	if err != nil {
		return fmt.Errorf("reading %s: %w", c.String("trace"), err)
	}
	if rep.Skipped > 0 || rep.Ignored > 0 {
		slog.Warn("trace rows left out", "trace", c.String("trace"), "skipped_bad", rep.Skipped, "ignored", rep.Ignored, "first_problems", rep.Problems)
	}
	out := c.App.Writer
	if c.Bool("sweep") {
		if c.Int("reserved") > 0 {
			return cmdline.Usagef("--sweep does not model reservations; leave out --reserved, or run without --sweep")
		}
		spec, err := sweepFromFlags(c)
		if err != nil {
			return cmdline.Usage(fmt.Errorf("checking flags: %w", err))
		}
		start := time.Now()
		// a sweep runs for minutes: say how far it is on stderr
		last := time.Time{}
		spec.Progress = func(done, total int) {
			if now := time.Now(); done == total || now.Sub(last) >= 5*time.Second {
				last = now
				fmt.Fprintf(c.App.ErrWriter, "simulate --sweep: %d of %d runs done (%s)\n", done, total, now.Sub(start).Round(time.Second))
			}
		}
		rows, err := Sweep(c.Context, o, jobs, spec)
		if err != nil {
			return err
		}
		slog.Info("sweep done", "runs", len(rows)+len(spec.BootMedians), "jobs", len(jobs), "seconds", time.Since(start).Seconds())
		if c.Bool("json") {
			return writeJSON(out, map[string]any{"jobs": len(jobs), "sweep": rows})
		}
		return WriteSweep(out, rows)
	}
	start := time.Now()
	res, err := Run(c.Context, o, jobs)
	if err != nil {
		return err
	}
	el := time.Since(start)
	slog.Info("simulated", "jobs", len(jobs), "policies", len(res.Policies), "seconds", el.Seconds(), "jobs_per_second", float64(len(jobs)*len(res.Policies))/el.Seconds())
	if p := c.String("svg"); p != "" {
		var b strings.Builder
		if err := WriteSVG(&b, res, fmt.Sprintf("%s: %d jobs, %.0f days", filepath.Base(c.String("trace")), res.Jobs, res.SpanHours/24)); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("writing the chart: %w", err)
		}
	}
	if c.Bool("json") {
		return writeJSON(out, res)
	}
	return WriteTable(out, res)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing json: %w", err)
	}
	return nil
}
