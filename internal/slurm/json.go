package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// MaxJSONSize caps squeue/sinfo --json output handed to the parsers.
const MaxJSONSize = 512 << 20

// Job is one job as squeue --json (Slurm 22.05, openapi v0.0.38) reports it.
// Numbers Slurm leaves unset (null) are 0 / zero time.
type Job struct {
	ID           uint32
	ArrayJobID   uint32 // 0 unless an array task
	Name         string
	User         string
	Account      string
	Partition    string
	State        string // PENDING, CONFIGURING, RUNNING, COMPLETED, ...
	Reason       string // state_reason: None, BeginTime, JobHeldUser, ...
	Nodes        string // allocated nodes (hostlist); "" while pending
	BatchHost    string
	Comment      string // --comment (burst: metadata)
	AdminComment string
	Features     string // --constraint
	TRESPerNode  string // raw, e.g. "gres:gpu:a10g:2" (--gres)
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
	TimeLimit       time.Duration // 0: not set (partition default)
	Requeue         bool
	RestartCount    uint32
	SubmitTime      time.Time
	StartTime       time.Time
	WorkDir         string
	// StdOut and StdErr are the job's --output/--error as Slurm stores
	// them (patterns such as %j unexpanded; "" for the default
	// slurm-%j.out in WorkDir).
	StdOut string
	StdErr string
}

// GPUsPerNode is the GPU count of the job's per-node GRES request.
func (j Job) GPUsPerNode() uint64 { return GPUs(j.GRESPerNode) }

type rawMeta struct {
	Plugin struct {
		Type string `json:"type"`
	} `json:"plugin"`
}

type rawError struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	ErrorNumber int    `json:"error_number"`
	Source      string `json:"source"`
}

type rawJob struct {
	JobID         *uint64 `json:"job_id"`
	ArrayJobID    *uint64 `json:"array_job_id"`
	Name          string  `json:"name"`
	UserName      string  `json:"user_name"`
	Account       string  `json:"account"`
	Partition     string  `json:"partition"`
	JobState      string  `json:"job_state"`
	StateReason   string  `json:"state_reason"`
	Nodes         string  `json:"nodes"`
	BatchHost     string  `json:"batch_host"`
	Comment       string  `json:"comment"`
	AdminComment  string  `json:"admin_comment"`
	Features      string  `json:"features"`
	TRESPerNode   string  `json:"tres_per_node"`
	TRESPerJob    string  `json:"tres_per_job"`
	TRESPerTask   string  `json:"tres_per_task"`
	CPUs          *int64  `json:"cpus"`
	Tasks         *int64  `json:"tasks"`
	NodeCount     *int64  `json:"node_count"`
	MemoryPerNode *int64  `json:"memory_per_node"`
	MemoryPerCPU  *int64  `json:"memory_per_cpu"`
	TimeLimit     *int64  `json:"time_limit"`
	Requeue       bool    `json:"requeue"`
	RestartCnt    *int64  `json:"restart_cnt"`
	SubmitTime    *int64  `json:"submit_time"`
	StartTime     *int64  `json:"start_time"`
	WorkDir       string  `json:"current_working_directory"`
	StdOut        string  `json:"standard_output"`
	StdErr        string  `json:"standard_error"`
}

// ParseSqueueJSON parses `squeue --json` output (Slurm 22.05, openapi
// v0.0.38; later versions' extra fields are ignored). A non-empty "errors"
// array, a missing "jobs" array, wrong field types, a job without job_id or
// an unparsable GRES request are errors naming the job.
func ParseSqueueJSON(b []byte) ([]Job, error) {
	var doc struct {
		Meta   rawMeta    `json:"meta"`
		Errors []rawError `json:"errors"`
		Jobs   *[]rawJob  `json:"jobs"`
	}
	if err := decodeDoc("squeue --json", b, &doc); err != nil {
		return nil, err
	}
	if err := docErrors("squeue --json", doc.Errors); err != nil {
		return nil, err
	}
	if doc.Jobs == nil {
		return nil, errors.New(`parsing squeue --json: no "jobs" array (is this squeue --json output?)`)
	}
	jobs := make([]Job, 0, len(*doc.Jobs))
	for i, r := range *doc.Jobs {
		if r.JobID == nil || *r.JobID == 0 || *r.JobID > math.MaxUint32 {
			return nil, fmt.Errorf("parsing squeue --json: jobs[%d]: missing or invalid job_id", i)
		}
		j := Job{
			ID: uint32(*r.JobID), Name: r.Name, User: r.UserName, Account: r.Account,
			Partition: r.Partition, State: r.JobState, Reason: r.StateReason, Nodes: r.Nodes,
			BatchHost: r.BatchHost, Comment: r.Comment, AdminComment: r.AdminComment,
			Features: r.Features, TRESPerNode: r.TRESPerNode, TRESPerJob: r.TRESPerJob,
			TRESPerTask: r.TRESPerTask, Requeue: r.Requeue, WorkDir: r.WorkDir,
			StdOut: r.StdOut, StdErr: r.StdErr,
		}
		where := fmt.Sprintf("parsing squeue --json: job %d", j.ID)
		var err error
		u32 := func(field string, p *int64) uint32 {
			if p == nil || err != nil {
				return 0
			}
			if *p < 0 || *p > math.MaxUint32 {
				err = fmt.Errorf("%s: %s %d out of range", where, field, *p)
				return 0
			}
			return uint32(*p)
		}
		j.ArrayJobID = u32("array_job_id", int64p(r.ArrayJobID))
		j.CPUs = u32("cpus", r.CPUs)
		j.Tasks = u32("tasks", r.Tasks)
		j.NodeCount = u32("node_count", r.NodeCount)
		j.RestartCount = u32("restart_cnt", r.RestartCnt)
		j.MemoryPerNodeMB = uint64(u32("memory_per_node", r.MemoryPerNode))
		j.MemoryPerCPUMB = uint64(u32("memory_per_cpu", r.MemoryPerCPU))
		j.TimeLimit = time.Duration(u32("time_limit", r.TimeLimit)) * time.Minute
		if err != nil {
			return nil, err
		}
		j.SubmitTime, j.StartTime = unixTime(r.SubmitTime), unixTime(r.StartTime)
		if j.GRESPerNode, err = ParseGRES(r.TRESPerNode); err != nil {
			return nil, fmt.Errorf("%s: tres_per_node: %w", where, err)
		}
		if j.GRESPerJob, err = ParseGRES(r.TRESPerJob); err != nil {
			return nil, fmt.Errorf("%s: tres_per_job: %w", where, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func int64p(p *uint64) *int64 {
	if p == nil {
		return nil
	}
	if *p > math.MaxInt64 {
		v := int64(-1)
		return &v
	}
	v := int64(*p)
	return &v
}

func unixTime(p *int64) time.Time {
	if p == nil || *p <= 0 {
		return time.Time{}
	}
	return time.Unix(*p, 0)
}

// Node is one node as sinfo --json (Slurm 22.05, openapi v0.0.38) reports it.
type Node struct {
	Name           string
	State          string   // base state, upper case: IDLE, ALLOCATED, MIXED, DOWN, ...
	Flags          []string // state_flags: CLOUD, POWERED_DOWN, POWERING_UP, DRAIN, ...
	Addr           string   // NodeAddr
	Hostname       string   // NodeHostName
	Features       []string // available features
	ActiveFeatures []string
	GRES           []GRES // configured GRES
	GRESUsed       string // raw gres_used, e.g. "gpu:a10g:1(IDX:0)"
	Reason         string
	Comment        string
	Extra          string
	Partitions     []string
	CPUs           uint32
	RealMemoryMB   uint64
	BootTime       time.Time
	SlurmdStart    time.Time // when the node's slurmd started (on a cloud node: its boot)
	SlurmdVersion  string
}

// HasFlag reports whether the node's state carries flag (e.g. "POWERED_DOWN").
func (n Node) HasFlag(flag string) bool {
	for _, f := range n.Flags {
		if strings.EqualFold(f, flag) {
			return true
		}
	}
	return false
}

// StateString is scontrol's form of the state: IDLE+CLOUD+POWERED_DOWN.
func (n Node) StateString() string {
	return strings.Join(append([]string{n.State}, n.Flags...), "+")
}

type rawNode struct {
	Name           string   `json:"name"`
	State          string   `json:"state"`
	StateFlags     []string `json:"state_flags"`
	Address        string   `json:"address"`
	Hostname       string   `json:"hostname"`
	Features       string   `json:"features"`
	ActiveFeatures string   `json:"active_features"`
	GRES           string   `json:"gres"`
	GRESUsed       string   `json:"gres_used"`
	Reason         string   `json:"reason"`
	Comment        string   `json:"comment"`
	Extra          string   `json:"extra"`
	Partitions     []string `json:"partitions"`
	CPUs           *int64   `json:"cpus"`
	RealMemory     *int64   `json:"real_memory"`
	BootTime       *int64   `json:"boot_time"`
	SlurmdStart    *int64   `json:"slurmd_start_time"`
	SlurmdVersion  string   `json:"slurmd_version"`
}

// ParseSinfoJSON parses `sinfo --json` output (Slurm 22.05, openapi v0.0.38).
func ParseSinfoJSON(b []byte) ([]Node, error) {
	var doc struct {
		Meta   rawMeta    `json:"meta"`
		Errors []rawError `json:"errors"`
		Nodes  *[]rawNode `json:"nodes"`
	}
	if err := decodeDoc("sinfo --json", b, &doc); err != nil {
		return nil, err
	}
	if err := docErrors("sinfo --json", doc.Errors); err != nil {
		return nil, err
	}
	if doc.Nodes == nil {
		return nil, errors.New(`parsing sinfo --json: no "nodes" array (is this sinfo --json output?)`)
	}
	nodes := make([]Node, 0, len(*doc.Nodes))
	for i, r := range *doc.Nodes {
		if r.Name == "" {
			return nil, fmt.Errorf("parsing sinfo --json: nodes[%d]: missing name", i)
		}
		n := Node{
			Name: r.Name, State: strings.ToUpper(r.State), Flags: r.StateFlags, Addr: r.Address,
			Hostname: r.Hostname, Features: splitList(r.Features), ActiveFeatures: splitList(r.ActiveFeatures),
			GRESUsed: r.GRESUsed, Reason: r.Reason, Comment: r.Comment, Extra: r.Extra,
			Partitions: r.Partitions, SlurmdVersion: r.SlurmdVersion, BootTime: unixTime(r.BootTime), SlurmdStart: unixTime(r.SlurmdStart),
		}
		if r.CPUs != nil && *r.CPUs > 0 && *r.CPUs <= math.MaxUint32 {
			n.CPUs = uint32(*r.CPUs)
		}
		if r.RealMemory != nil && *r.RealMemory > 0 {
			n.RealMemoryMB = uint64(*r.RealMemory)
		}
		var err error
		if n.GRES, err = ParseGRES(r.GRES); err != nil {
			return nil, fmt.Errorf("parsing sinfo --json: node %s: gres: %w", r.Name, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func splitList(s string) []string {
	if s == "" || s == "(null)" {
		return nil
	}
	return strings.Split(s, ",")
}

func decodeDoc(what string, b []byte, v any) error {
	if len(b) > MaxJSONSize {
		return fmt.Errorf("parsing %s: %d bytes, more than the %d allowed", what, len(b), MaxJSONSize)
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("parsing %s: not a JSON object (first bytes %.40q)", what, t)
	}
	if err := json.Unmarshal(t, v); err != nil {
		return fmt.Errorf("parsing %s: %w", what, describeJSONError(err))
	}
	return nil
}

func docErrors(what string, errs []rawError) error {
	if len(errs) == 0 {
		return nil
	}
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, strings.TrimSpace(fmt.Sprintf("%s %s (%d, %s)", e.Error, e.Description, e.ErrorNumber, e.Source)))
	}
	return fmt.Errorf("%s reported errors: %s", what, strings.Join(msgs, "; "))
}
