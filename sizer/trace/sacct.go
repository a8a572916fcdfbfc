package trace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// SacctCommand is the sacct invocation whose output ParseSacct reads: all
// users, allocations only (-X), parsable with "|" separators and a header.
const SacctCommand = "sacct -a -X -P -o JobID,Submit,Start,End,Elapsed,AllocTRES,ReqTRES,Comment"

const sacctTime = "2006-01-02T15:04:05"

// ParseSacct converts `sacct --parsable2` output (see SacctCommand; the
// header line is required, columns in any order) into trace jobs.
//
// Needed columns: JobID, Submit, and either Start+End or Elapsed, and
// AllocTRES or ReqTRES. The run time is End-Start when both are known,
// else Elapsed. GPUs come from AllocTRES (`gres/gpu=N`, the model from
// `gres/gpu:<model>=N`), falling back to ReqTRES. Comment, when present,
// becomes Metadata. Rows that are well-formed but are not finished GPU jobs
// (no GPUs, never started, still running, job steps like 12.batch) are
// ignored and counted in Report.Ignored. Times carry no zone; they are read
// in opt.Location (UTC when nil).
func ParseSacct(r io.Reader, opt ReadOptions) ([]Job, Report, error) {
	c := &collector{opt: opt}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	line := 0
	var col map[string]int
	var ncol int
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		fields := strings.Split(text, "|")
		if col == nil {
			hc, err := sacctHeader(line, fields)
			if err != nil {
				return nil, c.rep, fmt.Errorf("reading sacct output: %w", err)
			}
			col, ncol = hc, len(fields)
			continue
		}
		j, ok, err := sacctRow(line, fields, ncol, col, opt.loc())
		if err := c.add(line, j, ok, err); err != nil {
			return nil, c.rep, fmt.Errorf("reading sacct output: %w", err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, c.rep, fmt.Errorf("reading sacct output after line %d: %w", line, err)
	}
	if col == nil {
		return nil, c.rep, fmt.Errorf("reading sacct output: empty input; run %q", SacctCommand)
	}
	return c.done()
}

func sacctHeader(line int, fields []string) (map[string]int, error) {
	col := make(map[string]int, len(fields))
	for i, f := range fields {
		name := strings.ToLower(strings.TrimSpace(f))
		if _, dup := col[name]; dup {
			return nil, badRow(line, "header names column %q twice", f)
		}
		col[name] = i
	}
	has := func(n string) bool { _, ok := col[n]; return ok }
	var missing []string
	for _, n := range []string{"jobid", "submit"} {
		if !has(n) {
			missing = append(missing, n)
		}
	}
	if !(has("start") && has("end")) && !has("elapsed") {
		missing = append(missing, "start+end or elapsed")
	}
	if !has("alloctres") && !has("reqtres") {
		missing = append(missing, "alloctres or reqtres")
	}
	if len(missing) > 0 {
		return nil, badRow(line, "header %q lacks %s; run %q (with a header, no -n)", strings.Join(fields, "|"), strings.Join(missing, ", "), SacctCommand)
	}
	return col, nil
}

// sacctRow returns ok=false for rows that are fine but not finished GPU jobs.
func sacctRow(line int, f []string, ncol int, col map[string]int, loc *time.Location) (Job, bool, error) {
	if len(f) != ncol {
		return Job{}, false, badRow(line, "has %d fields, the header has %d (a '|' inside a field? sacct -P does not escape it)", len(f), ncol)
	}
	get := func(n string) (string, bool) {
		i, ok := col[n]
		if !ok {
			return "", false
		}
		return strings.TrimSpace(f[i]), true
	}
	id, _ := get("jobid")
	if id == "" {
		return Job{}, false, badRow(line, "JobID is empty")
	}
	if strings.Contains(id, ".") {
		return Job{}, false, nil // a job step; -X should have left these out
	}
	subS, _ := get("submit")
	sub, known, err := sacctParseTime(subS, loc)
	if err != nil {
		return Job{}, false, badRow(line, "Submit %q: %v", subS, err)
	}
	if !known {
		return Job{}, false, badRow(line, "Submit is %q; every job has a submit time", subS)
	}
	gpus, model, err := 0, "", error(nil)
	if s, ok := get("alloctres"); ok && s != "" {
		gpus, model, err = ParseTRESGPUs(s)
		if err != nil {
			return Job{}, false, badRow(line, "AllocTRES: %v", err)
		}
	}
	if s, ok := get("reqtres"); ok && gpus == 0 && s != "" {
		gpus, model, err = ParseTRESGPUs(s)
		if err != nil {
			return Job{}, false, badRow(line, "ReqTRES: %v", err)
		}
	}
	if gpus == 0 {
		return Job{}, false, nil
	}
	var dur time.Duration
	haveDur := false
	startS, hs := get("start")
	endS, he := get("end")
	if hs && he {
		st, sk, err := sacctParseTime(startS, loc)
		if err != nil {
			return Job{}, false, badRow(line, "Start %q: %v", startS, err)
		}
		en, ek, err := sacctParseTime(endS, loc)
		if err != nil {
			return Job{}, false, badRow(line, "End %q: %v", endS, err)
		}
		if !sk {
			return Job{}, false, nil // never started
		}
		if !ek {
			return Job{}, false, nil // still running
		}
		if en.Before(st) {
			return Job{}, false, badRow(line, "End %s is before Start %s", endS, startS)
		}
		dur, haveDur = en.Sub(st), true
	}
	if !haveDur {
		el, _ := get("elapsed")
		d, err := ParseSlurmDuration(el)
		if err != nil {
			return Job{}, false, badRow(line, "Elapsed %q: %v", el, err)
		}
		dur = d
	}
	meta, _ := get("comment")
	return Job{ID: id, Submit: sub, Duration: dur, GPUs: gpus, GPUModel: model, Metadata: meta}, true, nil
}

// sacctParseTime parses sacct's zone-less time; "Unknown", "None" and ""
// are known=false.
func sacctParseTime(s string, loc *time.Location) (t time.Time, known bool, err error) {
	switch s {
	case "", "Unknown", "None":
		return time.Time{}, false, nil
	}
	t, err = time.ParseInLocation(sacctTime, s, loc)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("want %s, Unknown or None", sacctTime)
	}
	return t, true, nil
}

// ParseTRESGPUs reads the GPU count from a Slurm TRES string such as
// "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1". The plain
// `gres/gpu=N` entry gives the count; a single `gres/gpu:<model>=N` entry
// gives the model (several models give ""). A string without GPUs is 0.
func ParseTRESGPUs(s string) (gpus int, model string, err error) {
	total, typed := -1, 0
	var models []string
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return 0, "", fmt.Errorf("entry %q is not name=value", kv)
		}
		if k != "gres/gpu" && !strings.HasPrefix(k, "gres/gpu:") {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, "", fmt.Errorf("entry %q: count %q is not a whole number", kv, v)
		}
		if k == "gres/gpu" {
			total = n
		} else {
			typed += n
			models = append(models, strings.ToLower(strings.TrimPrefix(k, "gres/gpu:")))
		}
	}
	if total < 0 {
		total = typed
	}
	if len(models) == 1 {
		model = models[0]
	}
	return total, model, nil
}

// ParseSlurmDuration parses Slurm's elapsed format: [DD-]HH:MM:SS, MM:SS,
// with optional fractional seconds.
func ParseSlurmDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	days := 0
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("days %q: want [DD-]HH:MM:SS", d)
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("want [DD-]HH:MM:SS or MM:SS")
	}
	var h, m int
	var sec float64
	var err error
	i := 0
	if len(parts) == 3 {
		if h, err = strconv.Atoi(parts[0]); err != nil || h < 0 {
			return 0, fmt.Errorf("hours %q: want [DD-]HH:MM:SS", parts[0])
		}
		i = 1
	}
	if m, err = strconv.Atoi(parts[i]); err != nil || m < 0 || m > 59 {
		return 0, fmt.Errorf("minutes %q: want 00-59", parts[i])
	}
	if sec, err = strconv.ParseFloat(parts[i+1], 64); err != nil || !(sec >= 0 && sec < 60) {
		return 0, fmt.Errorf("seconds %q: want 00-59", parts[i+1])
	}
	if days > 1e6 || h > 1e7 {
		return 0, fmt.Errorf("is too long")
	}
	total := float64(days)*86400 + float64(h)*3600 + float64(m)*60 + sec
	return time.Duration(total * float64(time.Second)), nil
}

// ConvertSacct reads sacct output and writes the simple CSV (see
// CSVColumns): the helper behind `burst-sizer simulate convert-sacct`.
func ConvertSacct(r io.Reader, w io.Writer, opt ReadOptions) (Report, error) {
	jobs, rep, err := ParseSacct(r, opt)
	if err != nil {
		return rep, err
	}
	if err := WriteCSV(w, jobs); err != nil {
		return rep, err
	}
	return rep, nil
}
