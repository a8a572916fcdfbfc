// Package trace reads job traces for burst's cost simulator: the Philly
// trace, the Alibaba GPU traces (cluster-trace-gpu-v2023 openb pod lists,
// cluster-trace-gpu-v2025 DLRM serving instances), burst's own simple CSV,
// and Slurm's `sacct --parsable2` output (converted into the simple CSV). Every reader is a pure function over an
// io.Reader; bad rows are errors naming the line, or, with
// ReadOptions.SkipBad, are skipped and counted in the Report.
package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"
)

// Job is one job of a trace: when it was submitted, how long it ran and how
// many GPUs it held.
type Job struct {
	ID       string        // trace-local identifier (line number, or Slurm job id)
	Submit   time.Time     // submission time
	Duration time.Duration // run time on the GPUs it asked for
	GPUs     int           // GPUs (>= 1)
	GPUModel string        // GRES type ("a100"); "" when the trace does not say
	Metadata string        // free text, e.g. a `--comment "burst: ..."`; may be ""
}

// ReadOptions tunes the readers.
type ReadOptions struct {
	// SkipBad skips malformed rows, counting them in Report.Skipped and
	// keeping the first few messages in Report.Problems, instead of failing
	// on the first one.
	SkipBad bool
	// Location interprets timestamps that carry no zone (Philly, sacct).
	// nil means UTC.
	Location *time.Location
}

func (o ReadOptions) loc() *time.Location {
	if o.Location == nil {
		return time.UTC
	}
	return o.Location
}

// Report says what a reader did with its input.
type Report struct {
	Rows     int      // data rows read (header excluded)
	Jobs     int      // jobs returned
	Skipped  int      // malformed rows skipped (SkipBad only)
	Ignored  int      // well-formed rows that are not GPU jobs that ran (sacct: no GPUs, never started, still running)
	Problems []string // first maxProblems messages for skipped rows
}

const maxProblems = 10

// rowError is a malformed row; reported with its line number.
type rowError struct {
	line int
	msg  string
}

func (e *rowError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

func badRow(line int, format string, args ...any) error {
	return &rowError{line: line, msg: fmt.Sprintf(format, args...)}
}

// handle either returns err (strict mode) or records it and returns nil.
func (r *Report) handle(err error, opt ReadOptions) error {
	if !opt.SkipBad {
		return err
	}
	r.Skipped++
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, err.Error())
	}
	return nil
}

// SortBySubmit orders jobs by submission time, keeping the input order of
// jobs submitted at the same instant.
func SortBySubmit(jobs []Job) {
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].Submit.Before(jobs[j].Submit) })
}

func checkJob(line int, j Job) error {
	if j.Duration < 0 {
		return badRow(line, "duration %v is negative; want seconds >= 0", j.Duration)
	}
	if j.GPUs < 1 {
		return badRow(line, "gpus is %d; want a whole number >= 1 (the simulator replays GPU jobs only)", j.GPUs)
	}
	return nil
}

// collector gathers a trace's jobs and its report row by row (every reader
// counts, checks and skips rows the same way).
type collector struct {
	opt  ReadOptions
	rep  Report
	jobs []Job
}

// add takes one data row: a job (ok), a well-formed row that is not a GPU
// job that ran (not ok, nil err: Report.Ignored) or a bad row, which stops
// the read unless opt.SkipBad (the error returned).
func (c *collector) add(line int, j Job, ok bool, err error) error {
	c.rep.Rows++
	if err == nil && ok {
		err = checkJob(line, j)
	}
	switch {
	case err != nil:
		return c.rep.handle(err, c.opt)
	case !ok:
		c.rep.Ignored++
	default:
		c.jobs = append(c.jobs, j)
	}
	return nil
}

// done returns the jobs sorted by submit time and the report.
func (c *collector) done() ([]Job, Report, error) {
	SortBySubmit(c.jobs)
	c.rep.Jobs = len(c.jobs)
	return c.jobs, c.rep, nil
}

// eachCSV calls row for every record of cr with its line number until EOF;
// a malformed record is a bad row (c decides whether it stops the read).
// Errors come back as "reading what: ...".
func (c *collector) eachCSV(cr *csv.Reader, what string, row func(line int, rec []string) error) error {
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return fmt.Errorf("reading %s: %w", what, err)
			}
			if herr := c.rep.handle(badRow(pe.Line, "%v", pe.Err), c.opt); herr != nil {
				return fmt.Errorf("reading %s: %w", what, herr)
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		if err := row(line, rec); err != nil {
			return fmt.Errorf("reading %s: %w", what, err)
		}
	}
}
