package sizerapi

import "time"

// The read-only views behind the dashboard (/ui) and their JSON endpoints.
// The admin token reads every account; an account credential
// (`burst-sizer token account NAME`) reads its own account only: the
// server filters in its queries, so other accounts' rows never leave it.
//
//	GET /v1/fleet          read  -> FleetView
//	GET /v1/jobs           read  -> JobsView     (?user= ?name= ?limit=)
//	GET /v1/jobs/{id}      read  -> JobRow       (404 outside the caller's account)
//	GET /v1/money          read  -> MoneyView
//	GET /v1/rightsizing    read  -> RightSizingView
//
// Every view takes ?account= (admins: that account only; an account
// credential: its own name or nothing, anything else is 403).
const (
	PathFleet       = "/v1/fleet"
	PathJobs        = "/v1/jobs"
	PathMoney       = "/v1/money"
	PathRightSizing = "/v1/rightsizing"
)

// FleetView is what runs now, per class, and what stops launches.
type FleetView struct {
	At      time.Time `json:"at"`
	Account string    `json:"account,omitempty"` // the scope; "" = every account
	// Slurm is false when Slurm's node and job states could not be read
	// (then nodes show only what the sizer recorded); SlurmError says why.
	Slurm      bool   `json:"slurm"`
	SlurmError string `json:"slurm_error,omitempty"`
	// SlurmDownSince is when Slurm stopped answering; the nodes then show
	// its last known state.
	SlurmDownSince *time.Time   `json:"slurm_down_since,omitempty"`
	Classes        []FleetClass `json:"classes"`
	// Live instances and their summed price.
	Instances int     `json:"instances"`
	HourlyUSD float64 `json:"hourly_usd"`
	// Unavailable are the pools burst-resume skips after a capacity error.
	Unavailable []UnavailablePool `json:"unavailable"`
	// Interruptions are the spot notices of the last 24 hours.
	Interruptions []FleetInterruption `json:"interruptions"`
	// GPUHealth are the GPU health events of the last 24 hours, newest
	// first (the admin's view only: instances of every account).
	GPUHealth []GPUHealthRow `json:"gpu_health"`
	// SizerVersion is the sizer's burst version; PeerVersions the callers
	// seen since it started with another one (upgrade them to match).
	SizerVersion string        `json:"sizer_version"`
	PeerVersions []PeerVersion `json:"peer_versions"`
}

// FleetClass is one node class.
type FleetClass struct {
	Class       string      `json:"class"`
	GPUModel    string      `json:"gpu_model"`
	GPUsPerNode int         `json:"gpus_per_node"`
	MaxNodes    int         `json:"max_nodes"`
	Breaker     BreakerView `json:"breaker"`
	Instances   int         `json:"instances"` // live
	HourlyUSD   float64     `json:"hourly_usd"`
	// States counts the class's nodes (in scope) by Slurm state, those
	// that need attention first, then the most common.
	States []FleetStateCount `json:"states"`
	// Attention is how many nodes need attention (FleetNode.Attention).
	Attention int `json:"attention"`
	// PoweredDown is how many nodes are powered down with no instance
	// and nothing wrong: the Fleet page counts them rather than list them.
	PoweredDown int         `json:"powered_down"`
	Nodes       []FleetNode `json:"nodes"`
	// Waits are the waits of the class's jobs (in scope) that started in
	// the last day, as users felt them (JobWait.TotalS).
	Waits WaitStats `json:"waits"`
}

// FleetStateCount is how many of a class's nodes are in one Slurm state.
type FleetStateCount struct {
	State     string `json:"state"` // as FleetNode.SlurmState; "unknown" without Slurm's view
	Nodes     int    `json:"nodes"`
	Attention bool   `json:"attention"` // the state needs an operator (DOWN, DRAIN, FAIL, ...)
}

// BreakerView is a class's launch breaker.
type BreakerView struct {
	State       string    `json:"state"` // closed, open, half-open
	Failures    int       `json:"failures"`
	TotalFails  int       `json:"total_failures"`
	TotalTrips  int       `json:"total_trips"`
	Until       time.Time `json:"until,omitzero"`
	LastFailure string    `json:"last_failure,omitempty"`
}

// FleetNode is one Slurm node of a class and the instance behind it.
type FleetNode struct {
	Node        string    `json:"node"`
	SlurmState  string    `json:"slurm_state,omitempty"` // e.g. IDLE+POWERED_DOWN
	SlurmReason string    `json:"slurm_reason,omitempty"`
	InstanceID  string    `json:"instance_id,omitempty"`
	Type        string    `json:"instance_type,omitempty"`
	Zone        string    `json:"zone,omitempty"`
	Capacity    string    `json:"capacity,omitempty"` // spot or on-demand
	UpSince     time.Time `json:"up_since,omitzero"`
	PriceUSD    float64   `json:"price_usd_h,omitempty"`
	JobID       string    `json:"job_id,omitempty"` // the job running on it (Slurm's view, else the one it was launched for)
	JobName     string    `json:"job_name,omitempty"`
	User        string    `json:"user,omitempty"`
	Account     string    `json:"account,omitempty"`
	LastReport  time.Time `json:"last_report,omitzero"` // its agent's last report (the sizer's clock)
	// Attention says why the node needs an operator ("" when it does
	// not): a Slurm state such as DOWN or DRAIN, an instance on a node
	// Slurm has powered down, an agent that stopped reporting.
	Attention string `json:"attention,omitempty"`
}

// UnavailablePool is a pool skipped after a capacity error, until Until.
type UnavailablePool struct {
	InstanceType string    `json:"instance_type"`
	Zone         string    `json:"zone"`
	Capacity     string    `json:"capacity"`
	Code         string    `json:"code"`
	Until        time.Time `json:"until"`
}

// FleetInterruption is a spot notice.
type FleetInterruption struct {
	Time         time.Time `json:"time"`
	InstanceID   string    `json:"instance_id"`
	Node         string    `json:"node"`
	InstanceType string    `json:"instance_type"`
	Zone         string    `json:"zone"`
	Action       string    `json:"action"`
	Account      string    `json:"account,omitempty"`
	JobID        string    `json:"job_id,omitempty"`
}

// JobDecision is the sizer's resume-time choice for a job: the best
// offering it ranked and why.
type JobDecision struct {
	JobID        string    `json:"job_id"`
	Time         time.Time `json:"time"`
	Class        string    `json:"class"`
	InstanceType string    `json:"instance_type"`
	Zone         string    `json:"zone"`
	Capacity     string    `json:"capacity"`
	PriceUSD     float64   `json:"price_usd_h"`
	ExpectedUSD  float64   `json:"expected_usd_h"`
	Reason       string    `json:"reason"`
	Offerings    int       `json:"offerings"`
	Avoided      int       `json:"avoided"` // spot pools skipped for recent interruptions
	Comment      string    `json:"comment,omitempty"`
}

// JobInterruption is one spot notice as it touched one job.
type JobInterruption struct {
	InstanceID   string        `json:"instance_id"`
	Node         string        `json:"node"`
	Action       string        `json:"action"`
	Time         time.Time     `json:"time"`
	Reported     bool          `json:"reported"` // the agent reported what it did to the job
	Signal       string        `json:"signal,omitempty"`
	Checkpointed bool          `json:"checkpointed"`
	Requeued     bool          `json:"requeued"`
	Waited       time.Duration `json:"waited_ns"`
	Error        string        `json:"error,omitempty"`
}

// JobsView lists recent and running jobs, newest first.
type JobsView struct {
	At      time.Time `json:"at"`
	Account string    `json:"account,omitempty"`
	Since   time.Time `json:"since"`
	Limit   int       `json:"limit"`
	Total   int       `json:"total"`   // jobs since Since in the scope (the list holds at most Limit, plus every running one)
	Running int       `json:"running"` // jobs with a live instance
	Jobs    []JobRow  `json:"jobs"`
}

// JobRow is one job: what it asked for against what it used, what it
// cost, the decision, and what interrupted it.
type JobRow struct {
	JobID       string `json:"job_id"`
	JobName     string `json:"job_name"`
	User        string `json:"user"`
	Account     string `json:"account"`
	Class       string `json:"class,omitempty"`
	GPUModel    string `json:"gpu_model,omitempty"`
	State       string `json:"state"` // Slurm's state when it knows the job, else running or ended
	Running     bool   `json:"running"`
	Nodes       int    `json:"nodes"`
	GPUsPerNode int    `json:"gpus_per_node"`
	// Used, from the agents' reports (Reported false: none arrived).
	Reported      bool    `json:"reported"`
	GPUsUsed      int     `json:"gpus_used"`
	GPUMemReqGiB  float64 `json:"gpu_memory_requested_gib"` // per node
	GPUMemUsedGiB float64 `json:"gpu_memory_used_gib"`      // peak, per node
	MeanUtilPct   float64 `json:"mean_util_pct"`
	// Instances launched for it, their spend (whole life), first launch
	// and last termination.
	Instances int       `json:"instances"`
	SpendUSD  float64   `json:"spend_usd"`
	Started   time.Time `json:"started,omitzero"`
	Ended     time.Time `json:"ended,omitzero"`
	// Requeues are its launch attempts after the first; Checkpoints the
	// spot notices on which the agent saw it checkpoint.
	Requeues         int               `json:"requeues"`
	Interruptions    int               `json:"interruptions"`
	Checkpoints      int               `json:"checkpoints"`
	Decision         *JobDecision      `json:"decision,omitempty"`
	InterruptionList []JobInterruption `json:"interruption_list,omitempty"`
	// Wait is what the job waited from its submission to its start (its
	// latest attempt's); nil until burst recorded both.
	Wait *JobWait `json:"wait,omitempty"`
}

// JobWait is a job's wait from Slurm's submit time to the start burst
// recorded (PrologSlurmctld, once its nodes are ready), split by what the
// job waited for: Queue is the time no node of its was booting (Slurm's
// queue, burst's launch, and from the node's registration to the start),
// Boot the time the node it waited for last was booting (from its launch
// to slurmd's start) and Registration the time slurmd took to register
// with slurmctld. The three add up to the total. The node waited for is
// the one that registered last; without its boot report (BootReport
// false) Boot runs from its launch to the start and holds the
// registration.
type JobWait struct {
	Submitted     time.Time `json:"submitted"`
	Started       time.Time `json:"started"`
	TotalS        float64   `json:"total_s"`
	QueueS        float64   `json:"queue_s"`
	BootS         float64   `json:"boot_s"`
	RegistrationS float64   `json:"registration_s"`
	// Node is the node waited for last ("" when none of its nodes had an
	// instance of burst's recorded: the whole wait is queue).
	Node       string `json:"node,omitempty"`
	BootReport bool   `json:"boot_report"`
}

// WaitStats are the submit-to-start waits of a class's jobs that started
// since Since (nearest-rank percentiles; Jobs 0: none started).
type WaitStats struct {
	Since time.Time `json:"since"`
	Jobs  int       `json:"jobs"`
	P50S  float64   `json:"p50_s"`
	P95S  float64   `json:"p95_s"`
}

// MoneyView is this month's spend against budgets, per user and per day,
// and what it saved.
type MoneyView struct {
	At       time.Time      `json:"at"`
	Account  string         `json:"account,omitempty"`
	From     time.Time      `json:"from"` // month start (UTC)
	TotalUSD float64        `json:"total_usd"`
	Accounts []AccountMoney `json:"accounts"`
	Users    []UserMoney    `json:"users"`
	Days     []DayMoney     `json:"days"`
	// The same instances at on-demand prices for the same seconds.
	OnDemandUSD        float64 `json:"on_demand_usd"`
	SavedVsOnDemandUSD float64 `json:"saved_vs_on_demand_usd"`
	SavedVsOnDemandPct float64 `json:"saved_vs_on_demand_pct"`
	// The idle-timeout counterfactual: each instance on demand, kept
	// IdleTimeout after its work (ParallelCluster's scale-down idle time).
	IdleTimeout    time.Duration `json:"idle_timeout_ns"`
	IdleTimeoutUSD float64       `json:"idle_timeout_usd"`
	SavedVsIdleUSD float64       `json:"saved_vs_idle_timeout_usd"`
	SavedVsIdlePct float64       `json:"saved_vs_idle_timeout_pct"`
	Instances      int           `json:"instances"`
	InstanceHours  float64       `json:"instance_hours"`
	ForecastMethod string        `json:"forecast_method"`
	// Reservations are the cluster's capacity reservations this month
	// (every account's scope only: a reservation is no account's).
	Reservations []ReservationMoney `json:"reservations"`
}

// ReservationMoney is a capacity reservation's month so far: what its
// reserved instance-hours cost (EC2 bills an On-Demand Capacity
// Reservation per reserved instance-hour at the on-demand rate, used or
// not; a Capacity Block's prepaid price is spread over its window), how
// many of them the cluster's instances ran in it, and what the rest cost.
type ReservationMoney struct {
	ReservationID string  `json:"reservation_id"`
	Kind          string  `json:"kind"` // "capacity-block" or "odcr"
	Match         string  `json:"match"`
	InstanceType  string  `json:"instance_type"`
	Zone          string  `json:"zone"`
	Count         int     `json:"count"`
	State         string  `json:"state"`
	PriceUSD      float64 `json:"price_usd"` // per reserved instance-hour
	// ReservedHours: Count x its time within the month so far.
	ReservedHours float64 `json:"reserved_hours"`
	// UsedHours: its instances' running time in it within that span.
	UsedHours float64 `json:"used_hours"`
	UsedPct   float64 `json:"used_pct"`
	Instances int     `json:"instances"` // instances that ran in it
	CostUSD   float64 `json:"cost_usd"`  // ReservedHours x PriceUSD
	IdleUSD   float64 `json:"idle_usd"`  // (ReservedHours - UsedHours) x PriceUSD
}

// AccountMoney is an account's month: spend, cap, and a forecast at the
// month's average rate so far.
type AccountMoney struct {
	Account      string     `json:"account"`
	SpentUSD     float64    `json:"spent_usd"`
	BudgetUSD    float64    `json:"budget_usd"` // 0: no cap
	RemainingUSD float64    `json:"remaining_usd"`
	UsedPct      float64    `json:"used_pct"` // of the cap; 0 without one
	ForecastUSD  float64    `json:"forecast_usd"`
	CapReachedAt *time.Time `json:"cap_reached_at,omitempty"` // at that rate, within the month
	Over         bool       `json:"over"`
	HourlyUSD    float64    `json:"hourly_usd"` // its live instances now
}

// UserMoney is a user's month.
type UserMoney struct {
	Account  string  `json:"account"`
	User     string  `json:"user"`
	SpentUSD float64 `json:"spent_usd"`
	Jobs     int     `json:"jobs"`
}

// DayMoney is one UTC day's spend, per account.
type DayMoney struct {
	Day       string             `json:"day"` // 2006-01-02
	SpentUSD  float64            `json:"spent_usd"`
	ByAccount map[string]float64 `json:"by_account"`
}

// RightSizingView lists recurring jobs that use far less than they ask for.
type RightSizingView struct {
	At           time.Time         `json:"at"`
	Account      string            `json:"account,omitempty"`
	From         time.Time         `json:"from"`
	UsedFraction float64           `json:"used_fraction"` // advised when use <= this share of the request
	Items        []RightSizingItem `json:"items"`
}

// RightSizingItem is one recurring job (account, user, job name).
type RightSizingItem struct {
	Advice
	Class          string  `json:"class"` // the class its jobs ran on (the latest)
	SuggestedClass string  `json:"suggested_class,omitempty"`
	SuggestedGPUs  int     `json:"suggested_gpus"`
	CurrentUSDH    float64 `json:"current_usd_h"`   // mean price of its instances
	SuggestedUSDH  float64 `json:"suggested_usd_h"` // cheapest offering of the suggested class, same capacity type
}

// PeerVersion is a kind of caller (node, admin: the Slurm hooks and the
// CLI, route, read-only, account) seen with another burst version than the
// sizer's.
type PeerVersion struct {
	Version   string    `json:"version"`
	Peer      string    `json:"peer"`
	LastNode  string    `json:"last_node,omitempty"` // for node agents
	Requests  int       `json:"requests"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}
