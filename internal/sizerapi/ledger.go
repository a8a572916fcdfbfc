package sizerapi

import "time"

// The spend ledger's endpoints (admin token):
//
//	POST /v1/instances/intent  LaunchIntent -> {}     (journaled before every CreateFleet)
//	POST /v1/jobs/run          JobRun -> {}           (a job's start, then its end, on its nodes)
//	GET  /v1/spend?account=A   -> AccountSpend        (what admission control checks)
//	GET  /v1/ledger            -> Ledger              (every instance's bill and its charges)
//	POST /v1/ledger/sync       -> LedgerSync          (drain EC2 events, reconcile with EC2 now)
const (
	PathInstanceIntent = "/v1/instances/intent"
	PathJobRun         = "/v1/jobs/run"
	PathSpend          = "/v1/spend"
	PathLedger         = "/v1/ledger"
	PathLedgerSync     = "/v1/ledger/sync"
)

// Sources of an instance's end in the ledger, strongest first: EC2's own
// transition time wins over burst's clock, which wins over "missing".
const (
	SourceEC2     = "ec2"     // StateTransitionReason or an EC2 state-change event
	SourceBurst   = "burst"   // the time burst-suspend or the reconciler saw TerminateInstances accepted
	SourceMissing = "missing" // EC2 no longer lists the instance and gave no time
)

// LaunchIntent is written to the journal (fsynced) before every
// CreateFleet, with the call's ClientToken: a crash between the launch and
// its record leaves the ledger enough to attribute what EC2 launched.
type LaunchIntent struct {
	ClientToken string        `json:"client_token"`
	Nodes       []string      `json:"nodes"`
	JobID       string        `json:"job_id,omitempty"`
	Account     string        `json:"account,omitempty"`
	User        string        `json:"user,omitempty"`
	Class       string        `json:"class,omitempty"`
	Capacity    string        `json:"capacity"`
	Offerings   []IntentOffer `json:"offerings"`
	Time        time.Time     `json:"time"`
}

// IntentOffer is one pool a launch may land in, with the price burst
// expected.
type IntentOffer struct {
	InstanceType string  `json:"instance_type"`
	Zone         string  `json:"zone"`
	PriceUSD     float64 `json:"price_usd"`
}

// JobRun is a job on its nodes as Slurm ran it: sent at the job's start
// (PrologSlurmctld, End zero) and at its end (EpilogSlurmctld). The ledger
// charges each instance's running time to the jobs that ran on its node.
type JobRun struct {
	JobID       string    `json:"job_id"`
	Account     string    `json:"account,omitempty"`
	User        string    `json:"user,omitempty"`
	Nodes       []string  `json:"nodes"`
	GPUsPerNode int       `json:"gpus_per_node,omitempty"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end,omitempty"`
}

// AccountSpend is an account's spend this month as admission control needs
// it: the total and what each job was charged so far.
type AccountSpend struct {
	Account  string  `json:"account"`
	SpentUSD float64 `json:"spent_usd"`
	// Jobs is what each job was charged, by JobKey: clusters sharing a
	// budget number their jobs each from 1.
	Jobs map[string]float64 `json:"jobs,omitempty"`
	// BurnUSDPerHour is what the account's running instances cost per hour now.
	BurnUSDPerHour float64   `json:"burn_usd_per_hour"`
	AsOf           time.Time `json:"as_of"`
	Source         string    `json:"source"` // "sizer" or "local" (state database read-only + journal)
}

// JobKey names a job of a cluster (cluster.name) in AccountSpend.Jobs:
// "cluster/id", or the id alone for a ledger row that has no cluster.
func JobKey(cluster, jobID string) string {
	if cluster == "" {
		return jobID
	}
	return cluster + "/" + jobID
}

// LedgerInstance is one instance's bill as burst computes it, the way EC2
// bills Linux instances: running time only, per second, at least 60 s per
// running segment; a spot instance EC2 interrupts in its first hour is not
// charged (Waived).
type LedgerInstance struct {
	InstanceID    string    `json:"instance_id"`
	Node          string    `json:"node,omitempty"`
	InstanceType  string    `json:"instance_type"`
	Zone          string    `json:"zone,omitempty"`
	Capacity      string    `json:"capacity"`
	PriceUSD      float64   `json:"price_usd"` // per hour
	PriceSource   string    `json:"price_source"`
	OnDemandUSD   float64   `json:"on_demand_usd"` // per hour
	Account       string    `json:"account,omitempty"`
	User          string    `json:"user,omitempty"`
	JobID         string    `json:"job_id,omitempty"` // the job it was launched for
	Source        string    `json:"source"`           // "resume" or "backfill"
	Launched      time.Time `json:"launched"`
	BillingStart  time.Time `json:"billing_start"`        // entered running (or the launch time when unknown)
	StartSource   string    `json:"start_source"`         // "ec2-event" or "launch"
	End           time.Time `json:"end,omitempty"`        // entered shutting-down or stopping
	EndSource     string    `json:"end_source,omitempty"` // ec2, burst, missing
	EndReason     string    `json:"end_reason,omitempty"` // EC2's StateReason code
	Open          bool      `json:"open"`
	Segments      int       `json:"segments"`
	BilledSeconds int64     `json:"billed_seconds"`
	GrossUSD      float64   `json:"gross_usd"` // before the spot waiver
	USD           float64   `json:"usd"`
	Waived        bool      `json:"waived,omitempty"`
}

// Charge is the part of an instance's bill one owner pays: a job for the
// time it ran on the node, the idle/boot owner for the rest.
type Charge struct {
	InstanceID  string  `json:"instance_id"`
	JobID       string  `json:"job_id,omitempty"`
	Account     string  `json:"account"`
	User        string  `json:"user,omitempty"`
	Kind        string  `json:"kind"` // "job" (ran on the node) or "idle" (boot, idle, the 60 s minimum)
	Seconds     float64 `json:"seconds"`
	USD         float64 `json:"usd"`
	OnDemandUSD float64 `json:"on_demand_usd"`
}

// Ledger is GET /v1/ledger: every instance alive this month and its charges.
type Ledger struct {
	From      time.Time        `json:"from"`
	To        time.Time        `json:"to"`
	Instances []LedgerInstance `json:"instances"`
	Charges   []Charge         `json:"charges"`
	// Reservations are the capacity reservations' own charges (all time).
	Reservations []LedgerReservation `json:"reservations"`
}

// LedgerReservation is a capacity reservation's bill: every reserved
// instance at the on-demand rate, per second from its start to its end (or
// now), used or not; the instances that ran in it are charged $0.
type LedgerReservation struct {
	ReservationID string    `json:"reservation_id"`
	InstanceType  string    `json:"instance_type"`
	Zone          string    `json:"zone"`
	Count         int       `json:"count"`
	PriceUSD      float64   `json:"price_usd"` // per reserved instance-hour
	State         string    `json:"state"`
	Match         string    `json:"match"` // open or targeted
	Start         time.Time `json:"start"`
	End           time.Time `json:"end,omitempty"`
	Open          bool      `json:"open"`
	Seconds       int64     `json:"seconds"`
	USD           float64   `json:"usd"`
}

// LedgerSync is what one ledger pass against EC2 did.
type LedgerSync struct {
	Backfilled []string `json:"backfilled"` // instances EC2 had and the ledger did not
	Closed     []string `json:"closed"`     // intervals closed at EC2's transition time
	Missing    []string `json:"missing"`    // open intervals EC2 no longer lists
	Repriced   []string `json:"repriced"`   // spot prices taken from EC2's price history
	Open       int      `json:"open"`       // intervals still open (instances running)
}
