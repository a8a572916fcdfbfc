// Package sizerapi defines the JSON wire types of the burst-sizer HTTP API, shared
// by sizer/server, internal/sizerclient and burst-agent (one wire record for
// both ends).
//
// Endpoints (all JSON, HTTPS only; "admin" needs the admin bearer token,
// "node" a node credential (internal/auth) and acts on that credential's own
// instance and node, "route" and "read-only" their credentials, "read" the read-only or an
// account credential (answered for its own account only; the dashboard's
// views are in dash.go), "identity"
// no bearer token but a signed EC2 instance identity document):
//
//	POST /v1/node/credential        identity  CredentialRequest -> CredentialResponse
//	POST /v1/node/credential/renew  node      {} -> CredentialResponse
//	POST /v1/rank                   admin     RankRequest -> RankResponse
//	POST /v1/route                  route     RouteRequest -> sizing.Decision
//	POST /v1/reports                node      ReportBatch -> ReportResult (idempotent by instance+node+seq)
//	POST /v1/interruptions          node      Interruption -> {}
//	POST /v1/boots                  node      BootReport -> {} (metrics; the boot's times split the jobs' waits)
//	POST /v1/instances/launch       admin     InstanceEvent -> {}
//	POST /v1/instances/terminate    admin     InstanceEvent (instance_id, time) -> {}
//	POST /v1/jobs/start             admin     JobStart -> {} (every job that starts on a burst node: PrologSlurmctld)
//	POST /v1/jobs/end               admin     JobEnd -> {} (its exit, and whether it ran out of GPU memory: EpilogSlurmctld)
//	GET  /v1/budgets                read      -> []BudgetStatus
//	GET  /v1/report                 read      -> UsageReport
//	GET  /v1/fleet, /v1/jobs[/ID], /v1/money, /v1/rightsizing  read (dash.go)
//	GET  /ui/                       the dashboard (login with the admin or an account token)
//	GET  /metrics                   read-only Prometheus text format (no token on the loopback metrics listener)
//	GET  /healthz                   none      "ok <version>"
//
// Every client sends its build's version in the HeaderVersion header; the
// sizer counts and logs a peer (node agent, Slurm hook, CLI) of another
// version than its own.
//
// Errors are ErrorResponse bodies with a stable Code.
package sizerapi

import (
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizing"
)

// HeaderVersion carries the sender's burst version (internal/version).
const HeaderVersion = "X-Burst-Version"

// HeaderMunge carries a MUNGE credential of the user behind a route request
// (`burst-sizer route` run by cli_filter as the submitting user): with
// sizer.route_auth: munge the sizer decodes it and routes for that user
// only.
const HeaderMunge = "X-Burst-Munge"

// Endpoint paths (see the list above).
const (
	PathNodeCredential    = "/v1/node/credential"
	PathNodeRenew         = "/v1/node/credential/renew"
	PathRank              = "/v1/rank"
	PathRoute             = "/v1/route"
	PathReports           = "/v1/reports"
	PathInterruptions     = "/v1/interruptions"
	PathInstanceLaunch    = "/v1/instances/launch"
	PathInstanceTerminate = "/v1/instances/terminate"
	PathJobStart          = "/v1/jobs/start"
	PathJobEnd            = "/v1/jobs/end"
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
	// CodeNotYet: the identity exchange cannot be decided yet (the
	// instance is not tagged with its node, or not running yet): retry.
	CodeNotYet = "not_yet"
	// CodeRateLimited: too many requests from this node; retry later.
	CodeRateLimited = "rate_limited"
	// CodeEnded: the credential's instance has ended.
	CodeEnded = "instance_ended"
	// CodeUnverifiable: the sizer cannot check the request now (EC2 or
	// Slurm did not answer); retry later.
	CodeUnverifiable = "unverifiable"
	// CodeNotLeader: the work asked for runs on the leading sizer and this
	// one stands by (sizer.store on PostgreSQL): ask the next sizer URL.
	CodeNotLeader = "not_leader"
)

// Identity signature kinds of CredentialRequest.Kind.
const (
	IdentityRSA2048   = "rsa2048"
	IdentitySignature = "signature"
)

// CredentialRequest is a node's proof of identity: its instance identity
// document and signature exactly as IMDS serves them, and a nonce the node
// keeps (root-only) and sends on every later exchange, so that a copied
// document is worth nothing to anyone else once the node registered.
type CredentialRequest struct {
	Document  string `json:"document"`
	Kind      string `json:"kind"`      // rsa2048 (default) or signature
	Signature string `json:"signature"` // base64, as IMDS serves it
	Nonce     string `json:"nonce"`     // 32-128 hex digits
}

// CredentialResponse is a node credential, what it names, and when to renew it.
type CredentialResponse struct {
	Credential string    `json:"credential"`
	Node       string    `json:"node"`
	InstanceID string    `json:"instance_id"`
	Expires    time.Time `json:"expires"`
	RenewAfter time.Time `json:"renew_after"`
}

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
	// What the user set explicitly (sizing keeps it): --gres/--gpus/
	// --gpus-per-node, --nodes, --partition.
	ExplicitGPUs      bool `json:"explicit_gpus,omitempty"`
	ExplicitNodes     bool `json:"explicit_nodes,omitempty"`
	ExplicitPartition bool `json:"explicit_partition,omitempty"`
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
		Explicit: sizing.Explicit{GPUs: j.ExplicitGPUs, Nodes: j.ExplicitNodes, Partition: j.ExplicitPartition},
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
	Offerings []cloud.Offering `json:"offerings"`
	Avoided   []Unavailable    `json:"avoided,omitempty"`
}

// RouteRequest asks for a submission-time decision.
type RouteRequest struct {
	Job JobRequest `json:"job"`
}
