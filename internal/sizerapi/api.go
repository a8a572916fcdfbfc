// Package sizerapi defines the JSON wire types of the burst-sizer HTTP API, shared
// by sizer/server, internal/sizerclient and burst-agent (one wire record for
// both ends).
//
// Endpoints (all JSON; "admin" needs the admin bearer token, "node" accepts a
// node credential for the named node too, "read" an account credential,
// answered for its own account only; the dashboard's views are in dash.go):
//
//	POST /v1/rank                 admin  RankRequest -> RankResponse
//	POST /v1/route                admin  RouteRequest -> sizing.Decision
//	POST /v1/reports              node   ReportBatch -> ReportResult (idempotent by node+seq)
//	POST /v1/interruptions        node   Interruption -> {}
//	POST /v1/instances/launch     admin  InstanceEvent -> {}
//	POST /v1/instances/terminate  admin  InstanceEvent (instance_id, time) -> {}
//	GET  /v1/budgets              read   -> []BudgetStatus
//	GET  /v1/report               read   -> UsageReport
//	GET  /v1/fleet, /v1/jobs[/ID], /v1/money, /v1/rightsizing  read (dash.go)
//	GET  /ui/                     the dashboard (login with the admin or an account token)
//	GET  /metrics                 none   Prometheus text format
//	GET  /healthz                 none   "ok"
//
// Errors are ErrorResponse bodies with a stable Code.
package sizerapi

import (
	"time"

	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizing"
)

// Endpoint paths (see the list above).
const (
	PathRank              = "/v1/rank"
	PathRoute             = "/v1/route"
	PathReports           = "/v1/reports"
	PathInterruptions     = "/v1/interruptions"
	PathInstanceLaunch    = "/v1/instances/launch"
	PathInstanceTerminate = "/v1/instances/terminate"
	PathBudgets           = "/v1/budgets"
	PathReport            = "/v1/report"
	PathBoots             = "/v1/boots"
)

// Error codes in ErrorResponse.Code.
const (
	CodeBadRequest   = "bad_request"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeTooLarge     = "too_large"
	CodeOverBudget   = "over_budget"
	CodeNoOffering   = "no_offering"
	CodeNoClass      = "no_class"
	CodeUnknownClass = "unknown_class"
	CodeInternal     = "internal"
	CodeShuttingDown = "shutting_down"
	CodeNotFound     = "not_found"
)

// ErrorResponse is the body of every non-2xx answer.
type ErrorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// JobRequest is a job as Slurm sees it; it maps onto sizing.Request.
type JobRequest struct {
	JobID            string  `json:"job_id,omitempty"`
	JobName          string  `json:"job_name,omitempty"`
	User             string  `json:"user,omitempty"`
	Account          string  `json:"account,omitempty"`
	Partition        string  `json:"partition,omitempty"`
	GPUModel         string  `json:"gpu_model,omitempty"`
	GPUsPerNode      int     `json:"gpus_per_node,omitempty"`
	Nodes            int     `json:"nodes,omitempty"`
	CPUsPerNode      int     `json:"cpus_per_node,omitempty"`
	MemoryMiBPerNode int     `json:"memory_mib_per_node,omitempty"`
	TimeLimitSeconds float64 `json:"time_limit_seconds,omitempty"`
	NoRequeue        bool    `json:"no_requeue,omitempty"`
	UserConstraint   string  `json:"constraint,omitempty"` // the job's own --constraint
	// Comment is the job's --comment; its "burst:" metadata is parsed by the server.
	Comment string `json:"comment,omitempty"`
}

// Policy converts the request, parsing the comment's metadata.
func (j JobRequest) Policy() (sizing.Request, []error) {
	md, errs := jobmeta.ParseMetadata(j.Comment)
	return sizing.Request{
		JobName: j.JobName, User: j.User, Account: j.Account, Partition: j.Partition,
		GPUModel: j.GPUModel, GPUsPerNode: j.GPUsPerNode, Nodes: j.Nodes,
		CPUsPerNode: j.CPUsPerNode, MemoryMiBPerNode: j.MemoryMiBPerNode,
		TimeLimit: time.Duration(j.TimeLimitSeconds * float64(time.Second)),
		NoRequeue: j.NoRequeue, Metadata: md,
	}, errs
}

// Unavailable is an offering the caller knows it cannot get.
type Unavailable struct {
	InstanceType string `json:"instance_type"`
	Zone         string `json:"zone,omitempty"`
	Capacity     string `json:"capacity,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// RankRequest asks for a class's offerings for a job at resume.
type RankRequest struct {
	Class       string        `json:"class"`
	Job         JobRequest    `json:"job"`
	Zones       []string      `json:"zones,omitempty"`
	Unavailable []Unavailable `json:"unavailable,omitempty"`
	EstHours    float64       `json:"est_hours,omitempty"`
}

// RankResponse lists offerings best first. Avoided lists the offerings the
// server excluded because of recent interruptions.
type RankResponse struct {
	Offerings []sizing.Offering `json:"offerings"`
	Avoided   []Unavailable     `json:"avoided,omitempty"`
}

// RouteRequest asks for a submission-time decision.
type RouteRequest struct {
	Job JobRequest `json:"job"`
}

// GPUReading is one GPU in one sampling tick (burst-agent reads it through
// NVML, agent/gpu), with the Slurm jobs whose processes run on it.
type GPUReading struct {
	Time             time.Time `json:"time,omitzero"`
	Index            int       `json:"index"`
	UUID             string    `json:"uuid,omitempty"`
	Name             string    `json:"name,omitempty"`
	UtilPercent      uint32    `json:"util_percent"`
	MemoryUsedBytes  uint64    `json:"memory_used_bytes"`
	MemoryTotalBytes uint64    `json:"memory_total_bytes"`
	PowerWatts       float64   `json:"power_watts,omitempty"`
	TemperatureC     uint32    `json:"temperature_c,omitempty"`
	// PIDs are the compute processes running on the GPU.
	PIDs   []int    `json:"pids,omitempty"`
	JobIDs []uint32 `json:"job_ids,omitempty"`
}

// JobSummary is one job's GPU use on one node, from its first to its last
// sample, sent when the job ends.
type JobSummary struct {
	JobID uint32    `json:"job_id"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	GPUs  []string  `json:"gpus"` // UUIDs
	// PeakMemoryBytes is the highest memory used on any one of its GPUs.
	PeakMemoryBytes  uint64  `json:"peak_memory_bytes"`
	MemoryTotalBytes uint64  `json:"memory_total_bytes"` // of that GPU model
	MeanUtilPercent  float64 `json:"mean_util_percent"`
	P95UtilPercent   float64 `json:"p95_util_percent"`
	GPUSeconds       float64 `json:"gpu_seconds"`
	// IdleGPUSeconds counts GPU samples below the agent's idle threshold.
	IdleGPUSeconds float64 `json:"idle_gpu_seconds"`
}

// Event is a spot interruption (or rebalance) the agent handled.
type Event struct {
	InstanceID string    `json:"instance_id"`
	Action     string    `json:"action"` // terminate, stop, hibernate, rebalance
	NoticeTime time.Time `json:"notice_time"`
	// Deadline is when EC2 reclaims the instance (zero for rebalance).
	Deadline time.Time  `json:"deadline,omitzero"`
	Jobs     []JobEvent `json:"jobs,omitempty"`
	Error    string     `json:"error,omitempty"`
}

// JobEvent is what happened to one job during an interruption.
type JobEvent struct {
	JobID        uint32        `json:"job_id"`
	Signal       string        `json:"signal"`
	Checkpointed bool          `json:"checkpointed"`
	Waited       time.Duration `json:"waited_ns"`
	Requeued     bool          `json:"requeued"`
	Released     bool          `json:"released"`
	Error        string        `json:"error,omitempty"`
}

// Kind says what a Record carries.
type Kind string

// Record kinds.
const (
	KindGPU          Kind = "gpu"          // one sampling tick: GPUs
	KindJobSummary   Kind = "job_summary"  // a job ended: Summary
	KindInterruption Kind = "interruption" // a spot notice was handled: Event
)

// Record is one reported item. Seq is assigned by the agent's spool: it
// increases by one per record per node, survives agent restarts, and is how
// the server drops duplicates (a batch is resent when the agent dies between
// sending it and recording the acknowledgement).
type Record struct {
	Seq     uint64       `json:"seq"`
	Time    time.Time    `json:"time"`
	Kind    Kind         `json:"kind"`
	GPUs    []GPUReading `json:"gpus,omitempty"`
	Summary *JobSummary  `json:"summary,omitempty"`
	Event   *Event       `json:"event,omitempty"`
}

// ReportBatch is what an agent posts: records in Seq order.
type ReportBatch struct {
	Node       string `json:"node"`
	InstanceID string `json:"instance_id,omitempty"`
	// Dropped counts records this node ever dropped because its on-disk
	// buffer was full (their Seqs never arrive).
	Dropped uint64   `json:"dropped"`
	Records []Record `json:"records"`
}

// ReportResult says how many records were new and how many were duplicates
// of records already stored (resent batches).
type ReportResult struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
}

// Interruption is a spot interruption (or rebalance) notice for an instance.
type Interruption struct {
	InstanceID   string    `json:"instance_id"`
	Node         string    `json:"node"`
	InstanceType string    `json:"instance_type,omitempty"` // filled from the launch record when empty
	Zone         string    `json:"zone,omitempty"`
	Action       string    `json:"action,omitempty"`
	Time         time.Time `json:"time"`
}

// Job is what a job asked for: its owner and allocation (burst-resume sends
// it with the launch, InstanceEvent.Job, so usage is tied to user and job name).
type Job struct {
	JobID       string `json:"job_id"`
	JobName     string `json:"job_name"`
	User        string `json:"user"`
	Account     string `json:"account"`
	Class       string `json:"class,omitempty"`
	GPUModel    string `json:"gpu_model,omitempty"`
	GPUsPerNode int    `json:"gpus_per_node"`
	Nodes       int    `json:"nodes,omitempty"`
	// GPUMemoryMiB is the memory of one of the job's GPUs.
	GPUMemoryMiB int `json:"gpu_memory_mib,omitempty"`
	// Attempt is Slurm's restart count of the job + 1 (requeues = attempts - 1).
	Attempt int `json:"attempt,omitempty"`
}

// InstanceEvent is a launch (all fields) or a termination (InstanceID, Time).
type InstanceEvent struct {
	InstanceID   string    `json:"instance_id"`
	Node         string    `json:"node,omitempty"`
	InstanceType string    `json:"instance_type,omitempty"`
	Zone         string    `json:"zone,omitempty"`
	Capacity     string    `json:"capacity,omitempty"`  // spot or on-demand
	PriceUSD     float64   `json:"price_usd,omitempty"` // per hour; 0: the server prices it from the catalog
	Account      string    `json:"account,omitempty"`
	Time         time.Time `json:"time"`
	Job          *Job      `json:"job,omitempty"`
}

// BudgetStatus is one account's month so far.
type BudgetStatus struct {
	Account      string    `json:"account"`
	MonthlyUSD   float64   `json:"monthly_usd"`
	SpentUSD     float64   `json:"spent_usd"`
	RemainingUSD float64   `json:"remaining_usd"`
	Over         bool      `json:"over"`
	Since        time.Time `json:"since"`
}

// UsageRow is one account's or one user's month.
type UsageRow struct {
	Account       string  `json:"account"`
	User          string  `json:"user,omitempty"`
	Jobs          int     `json:"jobs"`
	Reported      int     `json:"jobs_reported"`
	GPUsRequested float64 `json:"gpus_requested_avg"` // per node, mean over reported jobs
	GPUsUsed      float64 `json:"gpus_used_avg"`
	GPUMemReqGiB  float64 `json:"gpu_memory_requested_gib_avg"`
	GPUMemUsedGiB float64 `json:"gpu_memory_used_gib_avg"`
	MeanUtilPct   float64 `json:"mean_util_pct"`
	SpendUSD      float64 `json:"spend_usd"`
	BudgetUSD     float64 `json:"budget_usd,omitempty"` // accounts only
	Over          bool    `json:"over_budget,omitempty"`
}

// Advice is one right-sizing recommendation.
type Advice struct {
	Account         string  `json:"account"`
	User            string  `json:"user"`
	JobName         string  `json:"job_name"`
	Jobs            int     `json:"jobs"`
	AskedGPUs       int     `json:"asked_gpus"`
	UsedGPUs        int     `json:"used_gpus"`
	AskedMemGiB     float64 `json:"asked_gpu_memory_gib"`
	UsedMemGiB      float64 `json:"used_gpu_memory_gib"`
	SpendUSD        float64 `json:"spend_usd"`
	SaveUSDPerMonth float64 `json:"save_usd_per_month"`
	Text            string  `json:"text"`
}

// UsageReport is the monthly usage report (GET /v1/report, `burst-sizer
// report`): GPUs and GPU memory requested versus used, spend versus budget,
// right-sizing advice.
type UsageReport struct {
	From     time.Time  `json:"from"`
	To       time.Time  `json:"to"`
	Accounts []UsageRow `json:"accounts"`
	Users    []UsageRow `json:"users"`
	Advice   []Advice   `json:"advice"`
}

// Boot phase names in a BootReport, in boot order. The bootstrap's steps
// (internal/bootstrap) are phases too, under their own names (userdata,
// munge, mount: the FSx for Lustre mount, checkpoint-root, slurmd,
// register: slurmd start to slurmctld seeing the node, agent).
const (
	// PhaseEC2 is EC2 pending (the identity document's pendingTime) to the
	// bootstrap's start: pending to running plus the OS boot.
	PhaseEC2 = "ec2-pending-to-bootstrap"
	// PhaseTotal is the bootstrap from start to end.
	PhaseTotal = "bootstrap-total"
)

// BootReport is how one node booted, phase by phase; burst-agent bootstrap
// posts it to POST /v1/boots with the node's credential.
type BootReport struct {
	Node         string      `json:"node"`
	InstanceID   string      `json:"instance_id,omitempty"`
	InstanceType string      `json:"instance_type,omitempty"`
	PendingTime  time.Time   `json:"pending_time,omitempty"` // EC2 entered pending (zero: unknown)
	Started      time.Time   `json:"started"`                // the bootstrap started
	Phases       []BootPhase `json:"phases"`
	OK           bool        `json:"ok"`
}

// BootPhase is one phase of a boot.
type BootPhase struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Skipped bool    `json:"skipped,omitempty"`
	Failed  bool    `json:"failed,omitempty"`
}
