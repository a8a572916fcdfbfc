package slurm

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Job is one job as `squeue --json` or `scontrol --json show job` reports
// it, in the same form on every supported release. Numbers Slurm leaves
// unset are 0 / the zero time.
type Job struct {
	ID         uint32
	ArrayJobID uint32 // 0 unless an array job
	Name       string
	User       string
	Account    string
	Partition  string
	// State is the state as squeue prints it (Slurm's job_state_string): a
	// flag that squeue shows instead of the base state wins (COMPLETING,
	// CONFIGURING, REQUEUED, ...), else the base state (PENDING, RUNNING,
	// COMPLETED, ...). Every release gives the same State for the same job.
	State string
	// StateFlags are all flags of the state besides the base state, as
	// 23.11+ reports them (["CONFIGURING","POWER_UP_NODE"]); nil on
	// releases that report only the string (22.05).
	StateFlags   []string
	Reason       string // state_reason: None, BeginTime, JobHeldUser, ...
	Nodes        string // allocated nodes (hostlist); "" while pending
	BatchHost    string
	Comment      string // --comment (burst: metadata)
	AdminComment string
	Extra        string // --extra (23.02+); "" before
	Features     string // --constraint
	TRESPerNode  string // raw, e.g. "gres:gpu:a10g:2" (--gres; 23.02+: "gres/gpu:a10g:2")
	TRESPerJob   string // raw, e.g. "gres:gpu:2" (--gpus)
	TRESPerTask  string
	GRESPerNode  []GRES // parsed TRESPerNode
	GRESPerJob   []GRES // parsed TRESPerJob
	CPUs         uint32
	Tasks        uint32
	NodeCount    uint32
	// MemoryPerNodeMB and MemoryPerCPUMB are --mem and --mem-per-cpu in MiB
	// (0: not given).
	MemoryPerNodeMB uint64
	MemoryPerCPUMB  uint64
	TimeLimit       time.Duration // 0: not set (partition default) or unlimited
	Requeue         bool
	RestartCount    uint32
	SubmitTime      time.Time
	StartTime       time.Time
	EndTime         time.Time // the expected end while it runs; the end once it ended
	WorkDir         string
	// StdOut and StdErr are the job's --output/--error as Slurm reports
	// them (22.05: patterns such as %j unexpanded, "" for the default
	// slurm-%j.out in WorkDir).
	StdOut string
	StdErr string
}

// GPUsPerNode is the GPU count of the job's per-node GRES request.
func (j Job) GPUsPerNode() uint64 { return GPUs(j.GRESPerNode) }

// HasStateFlag reports whether the job's state carries flag (23.11+ flags,
// or the 22.05 string itself: "CONFIGURING").
func (j Job) HasStateFlag(flag string) bool {
	if j.State == flag {
		return true
	}
	for _, f := range j.StateFlags {
		if f == flag {
			return true
		}
	}
	return false
}

// jobShownFlags are the state flags squeue prints instead of the base state,
// in Slurm's order of precedence (job_state_string).
var jobShownFlags = []string{"COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED",
	"REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING"}

// jobBaseStates are Slurm's base job states.
var jobBaseStates = map[string]bool{"PENDING": true, "RUNNING": true, "SUSPENDED": true, "COMPLETED": true,
	"CANCELLED": true, "FAILED": true, "TIMEOUT": true, "NODE_FAIL": true, "PREEMPTED": true, "BOOT_FAIL": true,
	"DEADLINE": true, "OUT_OF_MEMORY": true}

// jobState maps job_state (one string on 22.05, base state and flags on
// 23.11+) to Job.State and Job.StateFlags.
func jobState(l strList) (state string, flags []string, err error) {
	if len(l) == 0 {
		return "", nil, errors.New("empty")
	}
	if len(l) == 1 {
		return l[0], nil, nil
	}
	base := ""
	for _, s := range l {
		if jobBaseStates[s] && base == "" {
			base = s
			continue
		}
		flags = append(flags, s)
	}
	if base == "" {
		return "", nil, fmt.Errorf("%q has no base state (one of PENDING, RUNNING, COMPLETED, ...)", []string(l))
	}
	for _, f := range jobShownFlags {
		for _, g := range flags {
			if g == f {
				return f, flags, nil
			}
		}
	}
	return base, flags, nil
}

type rawJob struct {
	JobID        num     `json:"job_id"`
	ArrayJobID   num     `json:"array_job_id"`
	Name         string  `json:"name"`
	UserName     string  `json:"user_name"`
	Account      string  `json:"account"`
	Partition    string  `json:"partition"`
	JobState     strList `json:"job_state"`
	StateReason  string  `json:"state_reason"`
	Nodes        string  `json:"nodes"`
	BatchHost    string  `json:"batch_host"`
	Comment      string  `json:"comment"`
	AdminComment string  `json:"admin_comment"`
	Extra        string  `json:"extra"`
	Features     string  `json:"features"`
	TRESPerNode  string  `json:"tres_per_node"`
	TRESPerJob   string  `json:"tres_per_job"`
	TRESPerTask  string  `json:"tres_per_task"`
	CPUs         num     `json:"cpus"`
	Tasks        num     `json:"tasks"`
	NodeCount    num     `json:"node_count"`
	MemPerNode   num     `json:"memory_per_node"`
	MemPerCPU    num     `json:"memory_per_cpu"`
	TimeLimit    num     `json:"time_limit"`
	Requeue      bool    `json:"requeue"`
	RestartCnt   num     `json:"restart_cnt"`
	SubmitTime   num     `json:"submit_time"`
	StartTime    num     `json:"start_time"`
	EndTime      num     `json:"end_time"`
	WorkDir      string  `json:"current_working_directory"`
	StdOut       string  `json:"standard_output"`
	StdErr       string  `json:"standard_error"`
}

// ParseJobsJSON parses the jobs of `squeue --json` or `scontrol --json show
// job` from any supported release (22.05's openapi v0.0.38, 23.02+'s data
// parsers v0.0.39 to v0.0.45; fields burst does not read are ignored).
// A non-empty "errors" array, a missing "jobs" array, a field of an
// unexpected type, a job without job_id or an unparsable GRES request are
// errors naming the release, the job and the field.
func ParseJobsJSON(b []byte) ([]Job, error) {
	var d struct {
		doc
		Jobs *[]rawJob `json:"jobs"`
	}
	if err := decodeDoc("job JSON", b, &d); err != nil {
		return nil, err
	}
	if err := docErrors("job JSON", d.Meta, d.Errors); err != nil {
		return nil, err
	}
	if d.Jobs == nil {
		return nil, fmt.Errorf(`parsing job JSON (%s): no "jobs" array (is this squeue --json output?)`, d.Meta)
	}
	jobs := make([]Job, 0, len(*d.Jobs))
	for i, r := range *d.Jobs {
		c := conv{where: fmt.Sprintf("parsing job JSON (%s): jobs[%d]", d.Meta, i)}
		id := c.u32("job_id", r.JobID)
		if c.err == nil && id == 0 {
			c.fail("job_id", "missing or 0")
		}
		if c.err != nil {
			return nil, c.err
		}
		j := Job{
			ID: id, Name: r.Name, User: r.UserName, Account: r.Account,
			Partition: r.Partition, Reason: r.StateReason, Nodes: r.Nodes,
			BatchHost: r.BatchHost, Comment: r.Comment, AdminComment: r.AdminComment, Extra: r.Extra,
			Features: r.Features, TRESPerNode: r.TRESPerNode, TRESPerJob: r.TRESPerJob,
			TRESPerTask: r.TRESPerTask, Requeue: r.Requeue, WorkDir: r.WorkDir,
			StdOut: r.StdOut, StdErr: r.StdErr,
		}
		c.where = fmt.Sprintf("parsing job JSON (%s): job %d", d.Meta, j.ID)
		var err error
		if j.State, j.StateFlags, err = jobState(r.JobState); err != nil {
			c.fail("job_state", "%v", err)
		}
		j.ArrayJobID = c.u32("array_job_id", r.ArrayJobID)
		j.CPUs = c.u32("cpus", r.CPUs)
		j.Tasks = c.u32("tasks", r.Tasks)
		j.NodeCount = c.u32("node_count", r.NodeCount)
		j.RestartCount = c.u32("restart_cnt", r.RestartCnt)
		j.MemoryPerNodeMB = c.uint("memory_per_node", r.MemPerNode, math.MaxInt64)
		j.MemoryPerCPUMB = c.uint("memory_per_cpu", r.MemPerCPU, math.MaxInt64)
		j.TimeLimit = c.minutes("time_limit", r.TimeLimit)
		j.SubmitTime = c.unix("submit_time", r.SubmitTime)
		j.StartTime = c.unix("start_time", r.StartTime)
		j.EndTime = c.unix("end_time", r.EndTime)
		if c.err != nil {
			return nil, c.err
		}
		if j.GRESPerNode, err = ParseGRES(r.TRESPerNode); err != nil {
			return nil, fmt.Errorf("%s: tres_per_node: %w", c.where, err)
		}
		if j.GRESPerJob, err = ParseGRES(r.TRESPerJob); err != nil {
			return nil, fmt.Errorf("%s: tres_per_job: %w", c.where, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}
