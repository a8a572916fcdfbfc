// Package doctor checks what a burst install needs, one line per check:
// the configuration, the binaries Slurm runs, slurm.conf and burst.conf,
// the token, CA and identity-certificate files and their modes, the state
// directory, the sizer (reached with the pinned CA), AWS credentials and
// each EC2 action burst calls (EC2 DryRun), the interruption queue, and the
// subnets, security groups and AMI. burst-sizer doctor runs it.
//
// Every outside system is reached through a narrow interface declared here
// (EC2, SQS, Sizer), so the checks are tested with fakes and run for real
// against the e2e stack.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/burst-hpc/burst/internal/config"
)

// Status is a check's outcome.
type Status string

// The outcomes: a failure makes doctor exit non-zero; a warning does not.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "FAIL"
)

// Result is one check.
type Result struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	// Fix says what to do; empty when Status is OK.
	Fix string `json:"fix,omitempty"`
}

// Report is every check, in the order they ran.
type Report []Result

// Failed reports whether any check failed.
func (r Report) Failed() bool {
	for _, x := range r {
		if x.Status == Fail {
			return true
		}
	}
	return false
}

// Counts is how many checks had each outcome.
func (r Report) Counts() (ok, warn, fail int) {
	for _, x := range r {
		switch x.Status {
		case OK:
			ok++
		case Warn:
			warn++
		default:
			fail++
		}
	}
	return
}

// Print writes one line per check ("ok   check: detail", then "-> fix"
// for a warning or failure) and a summary line.
func (r Report) Print(w io.Writer) error {
	for _, x := range r {
		line := fmt.Sprintf("%-4s %s: %s", x.Status, x.Check, x.Detail)
		if x.Fix != "" {
			line += " -> " + x.Fix
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	ok, warn, fail := r.Counts()
	_, err := fmt.Fprintf(w, "%d ok, %d warning(s), %d failure(s)\n", ok, warn, fail)
	return err
}

// JSON writes the report as {"checks":[...],"ok":N,"warnings":N,"failures":N}.
func (r Report) JSON(w io.Writer) error {
	ok, warn, fail := r.Counts()
	if r == nil {
		r = Report{}
	}
	return json.NewEncoder(w).Encode(struct {
		Checks   Report `json:"checks"`
		OK       int    `json:"ok"`
		Warnings int    `json:"warnings"`
		Failures int    `json:"failures"`
	}{r, ok, warn, fail})
}

// Sizer is the running daemon as doctor sees it: its /healthz over HTTPS
// with the CA of sizer.tls.ca_file pinned.
type Sizer interface {
	// Health returns the sizer's version (from "ok <version>").
	Health(ctx context.Context) (string, error)
}

// Env is what the checks read. Cfg is required (a configuration that does
// not load is reported by the caller, before any check runs); a nil EC2,
// SQS or Sizer is reported as a failure of the checks that need it, with
// the error that kept it from being made in its Err field.
type Env struct {
	Cfg *config.Config
	// SlurmConf is the slurm.conf to compare with what burst.yaml needs.
	SlurmConf string
	// Slurm runs the Slurm checks (release, burst.conf in sync).
	Slurm SlurmCheck
	Sizer Sizer
	// SizerErr is why Sizer is nil.
	SizerErr error
	EC2      EC2
	// EC2Err is why EC2 is nil (e.g. no AWS configuration).
	EC2Err error
	SQS    SQS
	SQSErr error
	// Credentials retrieves the AWS credentials the programs use; nil
	// skips that check (EC2Err says why).
	Credentials func(ctx context.Context) (source string, err error)
	// Version is this program's burst version (compared with the sizer's).
	Version string
	// Timeout bounds each check that calls out (default 10 s).
	Timeout time.Duration
}

// SlurmCheck is the Slurm side: the release burst.conf is written for and
// the differences between slurm.conf (with its includes) and what
// burst.yaml needs (burst-slurm-conf check's logic).
type SlurmCheck func(ctx context.Context, cfg *config.Config, slurmConf string) (release string, diffs []string, err error)

// Run runs every check.
func Run(ctx context.Context, e Env) Report {
	if e.Timeout <= 0 {
		e.Timeout = 10 * time.Second
	}
	var r Report
	add := func(rs ...Result) { r = append(r, rs...) }
	add(Result{Check: "config", Status: OK, Detail: e.Cfg.Source + " is valid"})
	add(checkBinaries(e.Cfg)...)
	add(checkSlurm(ctx, e)...)
	add(checkFiles(e.Cfg)...)
	add(checkStateDir(e.Cfg))
	add(checkSizer(ctx, e))
	add(checkAWS(ctx, e)...)
	return r
}

func bounded(ctx context.Context, e Env) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.Timeout)
}

func checkSizer(ctx context.Context, e Env) Result {
	res := Result{Check: "sizer reachable at " + e.Cfg.Sizer.URL}
	if e.Sizer == nil {
		res.Status, res.Detail, res.Fix = Fail, fmt.Sprintf("no client: %v", e.SizerErr), "set sizer.url and sizer.tls.ca_file in "+e.Cfg.Source+" (`burst-sizer tls init` writes the CA)"
		return res
	}
	ctx, cancel := bounded(ctx, e)
	defer cancel()
	v, err := e.Sizer.Health(ctx)
	switch {
	case err != nil:
		res.Status, res.Detail, res.Fix = Fail, err.Error(), "start `burst-sizer serve` (systemctl start burst-sizer), and check that sizer.tls.ca_file is the CA of its certificate"
	case e.Version != "" && v != "" && v != e.Version:
		res.Status, res.Detail, res.Fix = Warn, fmt.Sprintf("reachable with the pinned CA; it runs burst %s, this program %s", v, e.Version), "install the same burst release on the head node and in the node image"
	default:
		res.Status, res.Detail = OK, "reachable with the pinned CA, burst "+v
	}
	return res
}
