package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// The two Alibaba GPU traces from alibaba/clusterdata. Their times are
// seconds from an undisclosed trace start; the readers put that start at
// the Unix epoch (1970-01-01 00:00 UTC), so submit times are offsets, and
// an hour-of-week profile learned from them has an arbitrary but
// consistent phase.

// OpenBColumns is the header of cluster-trace-gpu-v2023's
// csv/openb_pod_list_*.csv (the ATC'23 "Beware of Fragmentation" trace of a
// production GPU cluster; no licence file, the repository's README allows
// use for research or study).
var OpenBColumns = []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"}

// DLRMColumns is the header of cluster-trace-gpu-v2025's
// disaggregated_DLRM_trace.csv (the NSDI'25 GPU-disaggregated DLRM serving
// trace; same terms).
var DLRMColumns = []string{"instance_sn", "role", "app_name", "cpu_request", "cpu_limit", "gpu_request", "gpu_limit", "rdma_request", "rdma_limit", "memory_request", "memory_limit", "disk_request", "disk_limit", "max_instance_per_node", "creation_time", "scheduled_time", "deletion_time"}

// ReadOpenB parses an openb pod list. Each pod that asked for GPUs and was
// scheduled is a job: submitted at creation_time, running from
// scheduled_time to deletion_time, on num_gpu GPUs (a GPU-sharing pod,
// gpu_milli < 1000, gets a whole GPU: burst does not share GPUs). Pods
// without GPUs and pods never scheduled (Pending, empty scheduled_time) are
// counted in Report.Ignored. Pods still running when the trace ended have
// deletion_time at its end, so their run time is a lower bound. Metadata
// records "qos=<qos> gpu_milli=<m>" (free text, not burst metadata).
func ReadOpenB(r io.Reader, opt ReadOptions) ([]Job, Report, error) {
	return readHeaderCSV(r, opt, "openb pod list", OpenBColumns, openBRow)
}

func openBRow(line int, rec []string) (Job, bool, error) {
	gpus, err := wholeNumber(rec[3])
	if err != nil {
		return Job{}, false, badRow(line, "num_gpu %q: %v", rec[3], err)
	}
	milli, err := wholeNumber(rec[4])
	if err != nil {
		return Job{}, false, badRow(line, "gpu_milli %q: %v", rec[4], err)
	}
	t, err := offsetColumns(line, rec, OpenBColumns, offsetCol{8, false}, offsetCol{9, false}, offsetCol{10, true})
	if err != nil {
		return Job{}, false, err
	}
	created, deleted, sched := t[0], t[1], t[2]
	if gpus == 0 || sched < 0 {
		return Job{}, false, nil // CPU-only, or never scheduled
	}
	return servedJob(line, rec[0], created, sched, deleted, gpus, fmt.Sprintf("qos=%s gpu_milli=%d", strings.TrimSpace(rec[6]), milli))
}

// ReadDLRM parses the GPU-disaggregated DLRM serving trace. Each HN
// (heterogeneous GPU node) inference instance with a GPU request that was
// created, scheduled and deleted inside the trace is a job: submitted at
// creation_time, running from scheduled_time to deletion_time, on
// gpu_request GPUs. CN (CPU node) instances and instances that existed
// before the trace began or outlived it (empty times) are counted in
// Report.Ignored. Metadata records "app=<app_name>".
func ReadDLRM(r io.Reader, opt ReadOptions) ([]Job, Report, error) {
	return readHeaderCSV(r, opt, "DLRM trace", DLRMColumns, dlrmRow)
}

func dlrmRow(line int, rec []string) (Job, bool, error) {
	role := strings.TrimSpace(rec[1])
	if role != "HN" && role != "CN" {
		return Job{}, false, badRow(line, "role %q: want HN or CN", rec[1])
	}
	gpus, err := wholeNumber(rec[5])
	if err != nil {
		return Job{}, false, badRow(line, "gpu_request %q: %v", rec[5], err)
	}
	t, err := offsetColumns(line, rec, DLRMColumns, offsetCol{14, true}, offsetCol{15, true}, offsetCol{16, true})
	if err != nil {
		return Job{}, false, err
	}
	created, sched, deleted := t[0], t[1], t[2]
	if role != "HN" || gpus == 0 || created < 0 || sched < 0 || deleted < 0 {
		return Job{}, false, nil // CPU node, or not wholly inside the trace
	}
	return servedJob(line, rec[0], created, sched, deleted, gpus, "app="+strings.TrimSpace(rec[2]))
}

// offsetCol is a column of trace offsets; an empty one is -1 when emptyOK.
type offsetCol struct {
	i       int
	emptyOK bool
}

// offsetColumns reads the columns' offsets in the order given; the first
// bad one is the error, named by its column.
func offsetColumns(line int, rec, names []string, cols ...offsetCol) ([]float64, error) {
	out := make([]float64, len(cols))
	for k, c := range cols {
		v, err := offsetSeconds(rec[c.i], c.emptyOK)
		if err != nil {
			return nil, badRow(line, "%s %q: %v", names[c.i], rec[c.i], err)
		}
		out[k] = v
	}
	return out, nil
}

// servedJob is a pod or instance that ran from sched to deleted, submitted
// at created.
func servedJob(line int, id string, created, sched, deleted float64, gpus int64, metadata string) (Job, bool, error) {
	if sched < created || deleted < sched {
		return Job{}, false, badRow(line, "times out of order: created %g, scheduled %g, deleted %g; want created <= scheduled <= deleted", created, sched, deleted)
	}
	return Job{
		ID:       strings.TrimSpace(id),
		Submit:   offsetTime(created),
		Duration: secondsDur(deleted - sched),
		GPUs:     int(gpus),
		Metadata: metadata,
	}, true, nil
}

// readHeaderCSV reads a CSV whose first line must be exactly cols; row
// turns a record into a job, or reports it well-formed but not a job
// (ok false, nil error: counted in Report.Ignored).
func readHeaderCSV(r io.Reader, opt ReadOptions, what string, cols []string, row func(line int, rec []string) (Job, bool, error)) ([]Job, Report, error) {
	var rep Report
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, rep, fmt.Errorf("reading %s: empty input, want header %s", what, strings.Join(cols, ","))
		}
		return nil, rep, fmt.Errorf("reading %s header: %w", what, err)
	}
	if len(header) != len(cols) {
		return nil, rep, fmt.Errorf("reading %s: line 1: header has %d columns, want %s", what, len(header), strings.Join(cols, ","))
	}
	for i, h := range cols {
		if strings.TrimSpace(strings.TrimPrefix(header[i], "\ufeff")) != h {
			return nil, rep, fmt.Errorf("reading %s: line 1: header column %d is %q, want %q", what, i+1, header[i], h)
		}
	}
	c := &collector{opt: opt, rep: rep}
	err = c.eachCSV(cr, what, func(line int, rec []string) error {
		if len(rec) != len(cols) {
			return c.add(line, Job{}, false, badRow(line, "has %d fields, want %d (%s)", len(rec), len(cols), strings.Join(cols, ",")))
		}
		j, ok, err := row(line, rec)
		return c.add(line, j, ok, err)
	})
	if err != nil {
		return nil, c.rep, err
	}
	return c.done()
}

// wholeNumber parses a non-negative whole number, also written as a float
// ("1.0").
func wholeNumber(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, errors.New("is negative")
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a number")
	}
	if f < 0 || f != math.Trunc(f) || f > 1e9 {
		return 0, errors.New("want a whole number from 0 to 1e9")
	}
	return int64(f), nil
}

// maxOffset keeps trace offsets (seconds since the trace start) within a
// thousand years.
const maxOffset = 1000 * 365 * 86400

// offsetSeconds parses seconds since the trace start; an empty field is -1
// when allowed.
func offsetSeconds(s string, emptyOK bool) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "nan") {
		if emptyOK {
			return -1, nil
		}
		return 0, errors.New("is empty")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a number of seconds")
	}
	if f < 0 || f > maxOffset {
		return 0, fmt.Errorf("want seconds from 0 to %d", maxOffset)
	}
	return f, nil
}

func offsetTime(s float64) time.Time {
	return time.Unix(0, 0).UTC().Add(time.Duration(math.Round(s * float64(time.Second))))
}

func secondsDur(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }
