package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/munge"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/server"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

// ExitNoClass is route's exit status when no node class fits the job.
const ExitNoClass = 3

// unsetNodes is what cli_filter reports for --nodes when the job did not
// set it (Slurm 22.05: min 1, max unset).
const unsetNodes = "1-0"

func routeCommand() *cli.Command {
	str := func(name, usage string) cli.Flag { return &cli.StringFlag{Name: name, Usage: usage} }
	return &cli.Command{
		Name:  "route",
		Usage: "choose a node class for a job (what cli_filter.lua calls at sbatch time)",
		Description: `Takes the job's sbatch options and prints the decision. Metadata goes in
--comment "burst: params=7B dataset=2TB deadline=8h workload=finetune method=lora precision=bf16 checkpoint=30m"
(keys: ` + strings.Join(jobmeta.Keys(), " ") + `).
What the job sets explicitly (--gres/--gpus/--gpus-per-node, --nodes, --partition) is kept;
metadata fills in the rest, scaling out over nodes to meet deadline=. --gres without --nodes
keeps one node (more nodes only to meet deadline=, never to make the job fit). A request
predicted to run out of GPU memory is refused with the numbers and how to fix it.
Asks the sizer daemon when it is reachable, else decides in-process from burst.yaml and the
state database (when readable).`,
		Flags: []cli.Flag{
			str("gres", "sbatch --gres, e.g. gpu:a100:8"), str("gpus", "sbatch --gpus (per job)"), str("gpus-per-node", "sbatch --gpus-per-node"),
			str("nodes", "sbatch --nodes"), str("comment", "sbatch --comment (burst metadata)"), str("extra", "Slurm --extra (burst metadata, on versions that have it)"),
			str("account", "sbatch --account"), str("user", "submitting user (default: the current user)"), str("job-name", "sbatch --job-name"),
			str("partition", "sbatch --partition"), str("time", "sbatch --time"), str("requeue", "requeue, no-requeue or unset (as cli_filter reports it)"),
			&cli.BoolFlag{Name: "no-requeue", Usage: "the job must not be requeued"},
			str("constraint", "sbatch --constraint (kept, combined with the class's)"), str("cpus-per-task", "sbatch --cpus-per-task"), str("mem", "sbatch --mem"),
			str("script", "the batch script (Slurm names a job without --job-name after it)"),
			&cli.BoolFlag{Name: "json", Usage: "print the decision as one JSON object"},
			&cli.BoolFlag{Name: "filter", Usage: "print the answer for cli_filter.lua (key=value lines)"},
			&cli.DurationFlag{Name: "timeout", Value: 3 * time.Second, Usage: "how long to wait for the daemon"},
			&cli.BoolFlag{Name: "local", Usage: "do not ask the daemon"},
		},
		Action: runRoute,
	}
}

// jobFromFlags turns sbatch-style options into an API job request.
func jobFromFlags(c *cli.Context) (sizerapi.JobRequest, error) {
	j := sizerapi.JobRequest{Account: c.String("account"), JobName: c.String("job-name"), Partition: c.String("partition"), User: c.String("user"), Comment: c.String("comment"), UserConstraint: c.String("constraint")}
	if j.JobName == "" && c.String("script") != "" {
		// what Slurm names the job: the script's base name
		j.JobName = filepath.Base(c.String("script"))
	}
	j.ExplicitPartition = j.Partition != ""
	if j.User == "" {
		if u, err := user.Current(); err == nil {
			j.User = u.Username
		}
	}
	j.Comment = jobmeta.Combine(j.Comment, c.String("extra"))
	var errs []error
	nodes := 0
	if v := c.String("nodes"); v != "" && v != unsetNodes {
		n, err := parseNodes(v)
		errs = append(errs, err)
		nodes = n
		j.ExplicitNodes = true
	}
	j.Nodes = nodes
	if v := c.String("gres"); v != "" {
		m, n, err := parseGresGPUs(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--gres: %w", err))
		}
		j.GPUModel, j.GPUsPerNode = m, n
		j.ExplicitGPUs = n > 0
	}
	if v := c.String("gpus-per-node"); v != "" {
		m, n, err := parseGPUSpec(v)
		errs = append(errs, err)
		if m != "" {
			j.GPUModel = m
		}
		j.GPUsPerNode = n
		j.ExplicitGPUs = n > 0
	}
	if v := c.String("gpus"); v != "" {
		m, n, err := parseGPUSpec(v)
		errs = append(errs, err)
		if m != "" {
			j.GPUModel = m
		}
		j.GPUsPerNode = int(math.Ceil(float64(n) / float64(max(nodes, 1))))
		// --gpus is per job: keeping it keeps the node count too
		j.ExplicitGPUs, j.ExplicitNodes, j.Nodes = n > 0, n > 0, max(nodes, 1)
	}
	if v := c.String("time"); v != "" {
		d, err := parseSlurmTime(v)
		errs = append(errs, err)
		j.TimeLimitSeconds = d.Seconds()
	}
	switch strings.ToLower(c.String("requeue")) {
	case "no-requeue", "0", "no", "false":
		j.NoRequeue = true
	}
	if c.Bool("no-requeue") {
		j.NoRequeue = true
	}
	if v := c.String("mem"); v != "" {
		m, err := parseMemMiB(v)
		errs = append(errs, err)
		j.MemoryMiBPerNode = m
	}
	if v := c.String("cpus-per-task"); v != "" {
		var n int
		if _, err := fmt.Sscanf(v, "%d", &n); err != nil {
			errs = append(errs, fmt.Errorf("--cpus-per-task=%q is not a number", v))
		}
		j.CPUsPerNode = n
	}
	return j, errors.Join(errs...)
}

func runRoute(c *cli.Context) error {
	job, err := jobFromFlags(c)
	if err != nil {
		return cmdline.Usage(fmt.Errorf("reading job options: %w", err))
	}
	st, err := loadSettings(c)
	if err != nil {
		return err
	}
	d, via, err := decide(c.Context, st, job, c.Duration("timeout"), c.Bool("local"), compose.CommandLogger(c.App.ErrWriter, st.cfg))
	out := c.App.Writer
	if c.Bool("filter") {
		opt := "gres"
		switch {
		case c.String("gpus-per-node") != "":
			opt = "gpus-per-node"
		case c.String("gpus") != "":
			opt = "gpus"
		}
		return writeFilter(out, st, job, opt, d, err)
	}
	if err != nil {
		code := cmdline.ExitFailure
		if errors.Is(err, sizing.ErrNoClass) {
			code = ExitNoClass
		}
		return cmdline.Exit(code, err)
	}
	if c.Bool("json") {
		err = json.NewEncoder(out).Encode(routeAnswer{Decision: d, DecidedBy: via})
	} else {
		_, err = fmt.Fprintf(out, "%s [%s]\n", summary(d), decidedBy(via))
	}
	if err != nil {
		return err
	}
	return refusal(d, via)
}

// routeAnswer is route --json: the decision and who made it.
type routeAnswer struct {
	sizing.Decision
	// DecidedBy is "daemon" (burst-sizer serve answered) or "local" (the
	// in-process fallback: the daemon did not answer, or --local).
	DecidedBy string `json:"decided_by"`
}

func decidedBy(via string) string {
	if via == "daemon" {
		return "decided by the sizer daemon"
	}
	return "decided in-process: the sizer daemon did not answer (or --local)"
}

// refusal is route's exit for a refused job: status 1 (a refusal is not a
// success), the reason already printed.
func refusal(d sizing.Decision, via string) error {
	if !d.Refused {
		return nil
	}
	return cmdline.Exit(cmdline.ExitFailure, fmt.Errorf("the job is refused (%s)", decidedBy(via)))
}

// decide asks the daemon, falling back to the in-process sizing. via says
// which answered.
func decide(ctx context.Context, st *settings, job sizerapi.JobRequest, timeout time.Duration, local bool, log *slog.Logger) (sizing.Decision, string, error) {
	if !local && st.cfg.Sizer.URL != "" {
		if tok, admin := routeCredential(st.cfg.Sizer.TokenFile); tok != "" {
			cl, err := sizerclient.New(st.cfg.Sizer.URL, tok, sizerclient.WithTimeout(timeout), sizerclient.WithCAFile(st.cfg.Sizer.TLS.CAFile), sizerclient.WithFallbackURLs(st.cfg.Sizer.URLs...))
			cred := ""
			if err == nil && !admin && st.cfg.Sizer.RouteAuth == "munge" {
				// the daemon routes for the user this proves; without it
				// the daemon refuses and the decision is made here, from
				// burst.yaml alone (the state database is not readable to users)
				cred, err = munge.Runner{Socket: st.cfg.Slurm.MungeSocket}.Encode(ctx)
				if err != nil {
					log.Warn("cannot prove the submitting user to the sizer with MUNGE; deciding locally", "err", err)
				}
			}
			if err == nil {
				d, err := cl.RouteAs(ctx, job, cred)
				if err == nil {
					return d, "daemon", nil
				}
				var ae *sizerclient.APIError
				if errors.As(err, &ae) && ae.Code == sizerapi.CodeNoClass {
					// the daemon's message already starts with ErrNoClass's text
					msg := strings.TrimPrefix(strings.TrimPrefix(ae.Message, sizing.ErrNoClass.Error()), ": ")
					return d, "daemon", fmt.Errorf("%w: %s", sizing.ErrNoClass, msg)
				}
				log.Debug("sizer daemon did not answer; deciding locally", "err", err)
			}
		}
	}
	p, err := st.policy()
	if err != nil {
		return sizing.Decision{}, "local", err
	}
	var sto *store.Store
	var months *spend.Reader
	if s, err := store.OpenReadOnlyConfig(ctx, storeConfig(st.cfg)); err == nil {
		defer s.Close()
		sto, months = s, spend.NewReader(s, nil)
	}
	d, err := server.Decide(ctx, p, sto, months, st.budgets, st.cfg.Accounting.IdleOwner, job, time.Now(), 0)
	if err == nil && sto == nil && st.budgets[job.Account] > 0 && !d.Refused {
		// submission never decides a capped account's spend blind, and does
		// not refuse for it either: burst-resume holds the job at start
		// until its spend can be known (budgets[].on_unknown)
		d.Reason += fmt.Sprintf("; account %s's budget cannot be checked now (sizer down, no state database): the job waits held at start until it can", job.Account)
	}
	return d, "local", err
}

// routeCredential returns the admin token if this user can read it
// (admin true), else the route credential beside it, else "".
func routeCredential(tokenFile string) (tok string, admin bool) {
	if tokenFile == "" {
		return "", false
	}
	if t, err := auth.LoadToken(tokenFile); err == nil {
		return t, true
	}
	if t, err := auth.LoadCredential(tokenFile + RouteTokenSuffix); err == nil {
		return t, false
	}
	return "", false
}

func summary(d sizing.Decision) string {
	if d.Refused {
		return d.RefuseMessage
	}
	cost := "cost unknown (give --time or burst metadata)"
	if d.EstCostUSD > 0 {
		cost = fmt.Sprintf("est. %.1f h, ~$%.2f", d.EstHours, d.EstCostUSD)
	}
	return fmt.Sprintf("%s: %d node(s) x %d %s %s on %s, $%.2f/h, %s. Why: %s", d.Class, d.Nodes, d.GPUsPerNode, d.GPUModel, d.Capacity, strings.Join(d.InstanceTypes, "|"), d.HourlyUSD, cost, d.Reason)
}

// FilterHeader starts the --filter answer.
const FilterHeader = "burst-sizer-filter 1"

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// writeFilter prints the answer cli_filter.lua reads: a header, then
// action=apply|refuse, the GPU request in the option the job used (gres,
// gpus or gpus_per_node: Slurm refuses --gres mixed with --gpus), and
// constraint, partition, message.
func writeFilter(w io.Writer, st *settings, job sizerapi.JobRequest, gpuOpt string, d sizing.Decision, err error) error {
	var b strings.Builder
	b.WriteString(FilterHeader + "\n")
	switch {
	case err != nil && errors.Is(err, sizing.ErrNoClass):
		fmt.Fprintf(&b, "action=refuse\nmessage=%s\n", oneLine("no burst node class fits this job: "+err.Error()))
	case err != nil:
		return cmdline.Exit(cmdline.ExitFailure, err) // the filter passes the job through unchanged
	case d.Refused:
		fmt.Fprintf(&b, "action=refuse\nmessage=%s\n", oneLine(d.RefuseMessage))
	default:
		constraint := d.Constraint
		if uc := strings.TrimSpace(job.UserConstraint); uc != "" && uc != d.Constraint {
			if strings.ContainsAny(uc, "|[]*") {
				constraint = "" // leave a complex user constraint alone
			} else {
				constraint = uc + "&" + d.Constraint
			}
		}
		part := d.Partition
		for _, p := range st.classPartitions[d.Class] {
			if p == job.Partition || (job.Partition == "" && p == st.defaultPartition) {
				part = "" // already bound for a partition holding the class
			}
		}
		if !job.ExplicitNodes && d.Nodes > 1 {
			fmt.Fprintf(&b, "nodes=%d\n", d.Nodes)
		}
		switch gpuOpt {
		case "gpus-per-node":
			fmt.Fprintf(&b, "action=apply\ngpus_per_node=%s:%d\n", d.GPUModel, d.GPUsPerNode)
		case "gpus":
			fmt.Fprintf(&b, "action=apply\ngpus=%s:%d\n", d.GPUModel, d.GPUsPerNode*max(d.Nodes, 1))
		default:
			fmt.Fprintf(&b, "action=apply\ngres=%s\n", d.Gres)
		}
		if constraint != "" {
			fmt.Fprintf(&b, "constraint=%s\n", constraint)
		}
		if part != "" {
			fmt.Fprintf(&b, "partition=%s\n", part)
		}
		fmt.Fprintf(&b, "message=%s\n", oneLine(summary(d)))
	}
	_, werr := io.WriteString(w, b.String())
	return werr
}
