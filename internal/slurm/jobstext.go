package slurm

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// 22.05's squeue --json prints every job whatever its filters, so a lookup
// by ID there reads plain squeue instead (squeue -h -t all -j IDS -O ...),
// whose filters work on every release: an answer as small as the jobs
// asked for. Job names, comments and paths are text a job user chose and
// may hold any separator or a newline, so every field ends with a marker
// holding a nonce drawn for that one call (jobsTextMarks): a job submitted
// before the call cannot hold it.

// jobsTextFields are the squeue -O fields read, in order.
var jobsTextFields = []string{
	"JobID", "ArrayJobID", "ArrayTaskID", "Name", "UserName", "Account", "Partition",
	"State", "Reason", "NodeList", "BatchHost", "Comment", "admin_comment", "Feature",
	"tres-per-node", "tres-per-job", "tres-per-task", "NumCPUs", "NumTasks", "NumNodes",
	"MinMemory", "tres-alloc", "TimeLimit", "Requeue", "RestartCnt",
	"SubmitTime", "StartTime", "EndTime", "WorkDir", "STDOUT", "STDERR",
}

// jobsTextMarks are the field separator and the record end of one call.
type jobsTextMarks struct{ field, end string }

// newJobsTextMarks draws a nonce for one call.
func newJobsTextMarks() (jobsTextMarks, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return jobsTextMarks{}, fmt.Errorf("drawing a nonce for squeue's field markers: %w", err)
	}
	n := hex.EncodeToString(b)
	return jobsTextMarks{field: "|" + n + "|", end: "|" + n + "$"}, nil
}

// format is the squeue -O argument: each field in full (size 0), followed
// by its marker.
func (m jobsTextMarks) format() string {
	var b strings.Builder
	for i, f := range jobsTextFields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f + ":0")
		if i == len(jobsTextFields)-1 {
			b.WriteString(m.end)
		} else {
			b.WriteString(m.field)
		}
	}
	return b.String()
}

// ParseJobsText parses `squeue -h -O <jobsTextMarks.format>` (22.05): one
// record per job (a pending array's tasks are one record, as in squeue
// --json), every field followed by its marker. Differences from
// ParseJobsJSON, which reads the same jobs: StateFlags is nil (as on
// 22.05), times are whole seconds in the local zone, TimeLimit whole
// minutes, StdOut/StdErr are squeue's (the default slurm-%j.out spelled
// out; StdErr is StdOut's path when --error is not set), a pending job
// has no StartTime or EndTime, nor has a job without a time limit an
// EndTime (squeue --json: a year after its start), and whether --mem was
// per node or per CPU is told from the job's memory TRES.
func ParseJobsText(b []byte, m jobsTextMarks) ([]Job, error) {
	if len(b) > MaxJSONSize {
		return nil, fmt.Errorf("parsing squeue jobs: %d bytes, more than the %d allowed", len(b), MaxJSONSize)
	}
	if m.field == "" || m.end == "" || m.field == m.end {
		return nil, fmt.Errorf("parsing squeue jobs: no field markers")
	}
	recs := strings.Split(string(b), m.end)
	if last := strings.TrimSpace(recs[len(recs)-1]); last != "" {
		return nil, fmt.Errorf("parsing squeue jobs: %.60q after the last record: want every record to end with its marker", last)
	}
	var jobs []Job
	for i, r := range recs[:len(recs)-1] {
		r = strings.TrimPrefix(strings.TrimPrefix(r, "\r"), "\n")
		f := strings.Split(r, m.field)
		if len(f) != len(jobsTextFields) {
			return nil, fmt.Errorf("parsing squeue jobs: record %d: %d fields, want %d (%s)", i+1, len(f), len(jobsTextFields), strings.Join(jobsTextFields, ","))
		}
		j, err := jobFromText(f)
		if err != nil {
			return nil, fmt.Errorf("parsing squeue jobs: record %d: %w", i+1, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// textConv converts squeue's fields, keeping the first error.
type textConv struct {
	f   []string
	err error
}

func (c *textConv) str(i int) string {
	switch s := c.f[i]; s {
	case "(null)", "N/A", "n/a":
		return ""
	default:
		return s
	}
}

func (c *textConv) fail(i int, format string, a ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%s %q: %s", jobsTextFields[i], c.f[i], fmt.Sprintf(format, a...))
	}
}

func (c *textConv) u32(i int) uint32 {
	s := c.str(i)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		c.fail(i, "want a count")
	}
	return uint32(n)
}

// word: a field that holds no spaces or control characters (names Slurm
// checked: states, users, partitions, hostlists, TRES).
func (c *textConv) word(i int) string {
	s := c.str(i)
	if strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		c.fail(i, "want no spaces or control characters")
	}
	return s
}

func (c *textConv) time(i int) time.Time {
	switch s := c.str(i); s {
	case "", "Unknown", "None", "NONE":
		return time.Time{}
	default:
		t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
		if err != nil {
			c.fail(i, "want a time such as 2026-12-02T01:26:15")
		}
		return t
	}
}

func (c *textConv) limit(i int) time.Duration {
	switch s := c.str(i); s {
	case "", "UNLIMITED", "NOT_SET", "INVALID":
		return 0
	default:
		d, err := parseTimeLimit(s)
		if err != nil {
			c.fail(i, "%v", err)
		}
		return d
	}
}

// parseTimeLimit parses squeue's [days-]hours:minutes:seconds,
// minutes:seconds or minutes, to whole minutes (as Slurm keeps limits).
func parseTimeLimit(s string) (time.Duration, error) {
	days := 0
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("want [days-]hours:minutes:seconds")
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) > 3 || days > 0 && len(parts) != 3 {
		return 0, fmt.Errorf("want [days-]hours:minutes:seconds")
	}
	var v [3]int // hours, minutes, seconds
	for k, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("want [days-]hours:minutes:seconds")
		}
		v[3-len(parts)+k] = n
	}
	if len(parts) == 1 { // minutes alone
		v = [3]int{0, v[2], 0}
	}
	d := time.Duration(days)*24*time.Hour + time.Duration(v[0])*time.Hour + time.Duration(v[1])*time.Minute + time.Duration(v[2])*time.Second
	return d.Truncate(time.Minute), nil
}

// parseMemMB parses squeue's memory ("200M", "1G", "1.50G", "0") to MiB.
func parseMemMB(s string) (uint64, error) {
	mult := 1.0
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult, s = 1.0/1024, s[:n-1]
		case 'M':
			s = s[:n-1]
		case 'G':
			mult, s = 1024, s[:n-1]
		case 'T':
			mult, s = 1024*1024, s[:n-1]
		case 'P':
			mult, s = 1024*1024*1024, s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v*mult > 1<<53 {
		return 0, fmt.Errorf("want memory such as 200M or 1G")
	}
	return uint64(v*mult + 0.5), nil
}

// tresMem is the mem= of a TRES list ("cpu=2,mem=200M,node=1"), in MiB.
func tresMem(tres string) (uint64, bool) {
	for _, kv := range strings.Split(tres, ",") {
		if v, ok := strings.CutPrefix(kv, "mem="); ok {
			mb, err := parseMemMB(v)
			return mb, err == nil
		}
	}
	return 0, false
}

func jobFromText(f []string) (Job, error) {
	c := &textConv{f: f}
	j := Job{
		ID: c.u32(0), Name: c.str(3), User: c.word(4), Account: c.word(5), Partition: c.word(6),
		State: c.word(7), Reason: c.str(8), Nodes: c.word(9), BatchHost: c.word(10),
		Comment: c.str(11), AdminComment: c.str(12), Features: c.str(13),
		TRESPerNode: c.word(14), TRESPerJob: c.word(15), TRESPerTask: c.word(16),
		CPUs: c.u32(17), Tasks: c.u32(18), NodeCount: c.u32(19),
		TimeLimit: c.limit(22), RestartCount: c.u32(24),
		SubmitTime: c.time(25), StartTime: c.time(26), EndTime: c.time(27),
		WorkDir: c.str(28), StdOut: c.str(29), StdErr: c.str(30),
	}
	if c.str(2) != "" { // an array job (or task)
		j.ArrayJobID = c.u32(1)
	}
	switch c.f[23] {
	case "1":
		j.Requeue = true
	case "0":
	default:
		c.fail(23, "want 0 or 1")
	}
	if c.err != nil {
		return Job{}, c.err
	}
	if j.ID == 0 {
		return Job{}, fmt.Errorf("JobID %q: want a positive job ID", f[0])
	}
	if j.State == "" || strings.IndexFunc(j.State, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r == '_') }) >= 0 {
		return Job{}, fmt.Errorf("job %d: State %q is not a state name", j.ID, f[7])
	}
	if strings.ContainsFunc(j.Reason, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return Job{}, fmt.Errorf("job %d: Reason %q holds a control character", j.ID, j.Reason)
	}
	mem, err := parseMemMB(c.str(20))
	if err != nil {
		return Job{}, fmt.Errorf("job %d: MinMemory %q: %w", j.ID, f[20], err)
	}
	// squeue prints --mem and --mem-per-cpu alike; the memory TRES is the
	// per-node figure times the nodes, or the per-CPU one times the CPUs
	if total, ok := tresMem(c.str(21)); ok && mem > 0 && total != mem*uint64(max(j.NodeCount, 1)) && total == mem*uint64(j.CPUs) {
		j.MemoryPerCPUMB = mem
	} else {
		j.MemoryPerNodeMB = mem
	}
	if j.GRESPerNode, err = ParseGRES(j.TRESPerNode); err != nil {
		return Job{}, fmt.Errorf("job %d: tres-per-node: %w", j.ID, err)
	}
	if j.GRESPerJob, err = ParseGRES(j.TRESPerJob); err != nil {
		return Job{}, fmt.Errorf("job %d: tres-per-job: %w", j.ID, err)
	}
	return j, nil
}
