package sizerapi

import (
	"time"
)

// BudgetStatus is one account's month so far.
type BudgetStatus struct {
	Account      string    `json:"account"`
	MonthlyUSD   float64   `json:"monthly_usd"`
	SpentUSD     float64   `json:"spent_usd"`
	RemainingUSD float64   `json:"remaining_usd"`
	Over         bool      `json:"over"`
	Since        time.Time `json:"since"`
	// ReservedUSD is what admitted running jobs may still spend (their
	// reservations less what they were charged so far); it counts against
	// the cap until they end.
	ReservedUSD    float64 `json:"reserved_usd"`
	BurnUSDPerHour float64 `json:"burn_usd_per_hour"`
	// ForecastCapAt is when spend plus reservations reaches the cap at the
	// current burn rate; absent when it will not this month.
	ForecastCapAt *time.Time `json:"forecast_cap_at,omitempty"`
	OnDemandUSD   float64    `json:"on_demand_usd"` // the same seconds at on-demand prices
	SavingUSD     float64    `json:"saving_usd"`
	// OnUnknown is the budget's rule when its spend cannot be known: hold or allow.
	OnUnknown string `json:"on_unknown,omitempty"`
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
	OnDemandUSD   float64 `json:"on_demand_usd"` // the same seconds at on-demand prices
	SavingUSD     float64 `json:"saving_usd"`
	BudgetUSD     float64 `json:"budget_usd,omitempty"` // accounts only
	Over          bool    `json:"over_budget,omitempty"`
	ReservedUSD   float64 `json:"reserved_usd,omitempty"` // accounts only
	// ForecastCapAt is when the account reaches its cap at the current
	// burn rate (accounts with a budget only).
	ForecastCapAt *time.Time `json:"forecast_cap_at,omitempty"`
}

// JobSpend is one job's charges this month: its runs on burst nodes, plus
// (with accounting.idle_owner launching-job) the boot and idle time of the
// instances launched for it.
type JobSpend struct {
	JobID       string  `json:"job_id"`
	Account     string  `json:"account"`
	User        string  `json:"user,omitempty"`
	Instances   int     `json:"instances"`
	RunSeconds  float64 `json:"run_seconds"`
	IdleSeconds float64 `json:"idle_seconds"`
	SpendUSD    float64 `json:"spend_usd"`
	OnDemandUSD float64 `json:"on_demand_usd"`
	SavingUSD   float64 `json:"saving_usd"`
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
	Jobs     []JobSpend `json:"jobs"`
	Advice   []Advice   `json:"advice"`
	// SpendUSD, OnDemandUSD and SavingUSD are the month's totals.
	SpendUSD    float64 `json:"spend_usd"`
	OnDemandUSD float64 `json:"on_demand_usd"`
	SavingUSD   float64 `json:"saving_usd"`
}

// JobUsage is what one job was given and what it used (per node: the
// busiest node counts).
type JobUsage struct {
	JobID        string    `json:"job_id"`
	JobName      string    `json:"job_name"`
	User         string    `json:"user"`
	Account      string    `json:"account"`
	Class        string    `json:"class,omitempty"`
	GPUModel     string    `json:"gpu_model,omitempty"`
	GPUsPerNode  int       `json:"gpus_per_node"`
	Nodes        int       `json:"nodes"`
	GPUMemoryMiB int       `json:"gpu_memory_mib"` // per GPU
	Reported     bool      `json:"reported"`       // any utilisation data arrived
	GPUsUsed     int       `json:"gpus_used"`
	PeakMemMiB   int       `json:"peak_gpu_memory_mib"` // per node
	MeanUtilPct  float64   `json:"mean_util_pct"`       // over allocated GPUs
	LastSeen     time.Time `json:"last_seen"`
}

// AllocatedMemMiB is the GPU memory per node the job was given.
func (u JobUsage) AllocatedMemMiB() int { return u.GPUsPerNode * u.GPUMemoryMiB }
