package simulate

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/burst-hpc/burst/internal/catalog"
)

// Reservation kinds (issue 29): what a fixed number of reserved nodes costs.
const (
	// ReservationODCR is an On-Demand Capacity Reservation: billed at the
	// type's on-demand rate whether used or not.
	ReservationODCR = "odcr"
	// ReservationBlock is an EC2 Capacity Block for ML: prepaid for its
	// window at the block's own price per instance-hour.
	ReservationBlock = "capacity-block"
)

// PolicyBurstReserved is the burst policy with Options.Reserved: reserved
// nodes first, then spot, then on-demand. Run adds its row after burst's
// whenever a reservation is given; it is not chosen through Policies.
const PolicyBurstReserved = "burst+reserved"

// Reservation is a fixed number of reserved nodes of one instance type,
// held from the first submission to the end of the run (the reservation's
// window covers the trace). burst uses them before any launch: their
// marginal cost is zero, the bill is paid whether they run jobs or not.
// A job takes reserved nodes when its sizer ranking names the reserved type
// and enough of them are free (all its nodes from the reservation, or none).
type Reservation struct {
	Kind  string // ReservationODCR or ReservationBlock
	Type  string // instance type (a catalog name)
	Nodes int    // 0: no reservation
	// USDPerHour is the price per instance-hour. 0 for an ODCR means the
	// type's on-demand price; a Capacity Block needs its price.
	USDPerHour float64
}

// ReservationResult is what the reservation did in the burst+reserved run,
// and what that run cost against burst with no reservation.
type ReservationResult struct {
	Kind           string  `json:"kind"`
	Type           string  `json:"type"`
	Nodes          int     `json:"nodes"`
	USDPerHour     float64 `json:"usd_per_instance_hour"`
	HeldHours      float64 `json:"held_hours"` // the window: first submission to the run's end
	BillUSD        float64 `json:"bill_usd"`   // nodes x held hours x price, used or idle
	UsedNodeHours  float64 `json:"used_node_hours"`
	UtilisationPct float64 `json:"utilisation_pct"`
	IdleCostUSD    float64 `json:"idle_cost_usd"` // the bill's share for node-hours without a job
	Jobs           int     `json:"jobs"`          // placements on reserved nodes (a requeue counts again)
	// CostWithUSD is the burst+reserved run's whole cost (the bill
	// included); CostWithoutUSD is burst's with no reservation.
	CostWithUSD    float64 `json:"cost_with_usd"`
	CostWithoutUSD float64 `json:"cost_without_usd"`
	SavedUSD       float64 `json:"saved_usd"` // without - with; negative: the reservation cost more
	SavedPct       float64 `json:"saved_pct"`
	// BreakEvenUSDPerHour is the price per instance-hour at which the
	// reservation would cost the same as none: what the run spent besides
	// the bill does not depend on the price (placement ignores it), so
	// (without - (with - bill)) / (nodes x held hours).
	BreakEvenUSDPerHour float64 `json:"break_even_usd_per_instance_hour"`
}

// validate checks the reservation against the catalog and the policies.
func (r Reservation) validate(o Options) []error {
	if r.Nodes == 0 {
		return nil
	}
	var errs []error
	if r.Nodes < 0 {
		errs = append(errs, fmt.Errorf("reservation nodes %d is negative", r.Nodes))
	}
	t, ok := o.Catalog.Lookup(r.Type)
	switch {
	case r.Type == "":
		errs = append(errs, errors.New("reservation needs an instance type"))
	case !ok || t.GPUs < 1:
		errs = append(errs, fmt.Errorf("reservation type %q is not a GPU instance type in the catalog", r.Type))
	}
	if math.IsNaN(r.USDPerHour) || math.IsInf(r.USDPerHour, 0) || r.USDPerHour < 0 {
		errs = append(errs, fmt.Errorf("reservation price %g USD per instance-hour: want a number >= 0", r.USDPerHour))
	}
	switch r.Kind {
	case ReservationODCR:
		if ok && r.USDPerHour == 0 && !t.HasPrice() {
			errs = append(errs, fmt.Errorf("reservation type %q has no on-demand price in the catalog; give the ODCR's price per instance-hour", r.Type))
		}
	case ReservationBlock:
		if r.USDPerHour == 0 {
			errs = append(errs, errors.New("a capacity-block reservation needs its price per instance-hour (it is prepaid at the block's own rate)"))
		}
	default:
		errs = append(errs, fmt.Errorf("reservation kind %q is unknown; want %s or %s", r.Kind, ReservationODCR, ReservationBlock))
	}
	if !slices.Contains(o.Policies, PolicyBurst) {
		errs = append(errs, errors.New("a reservation is simulated against the burst policy: include burst in the policies"))
	}
	return errs
}

// price is the reservation's USD per instance-hour.
func (r Reservation) price(t catalog.InstanceType) float64 {
	if r.USDPerHour > 0 {
		return r.USDPerHour
	}
	return t.OnDemandUSD
}

// reserved is the reservation during one run: its free nodes, the class
// they serve, and what they did.
type reserved struct {
	typ     catalog.InstanceType
	price   float64
	nodes   int
	class   string // node class of the reserved type, once a job's ranking names it
	free    []*node
	busySec float64 // node-seconds with a job
	jobs    int
	bill    float64
	heldSec float64
}

// newReserved makes the reservation's nodes, up and free from the first
// submission.
func newReserved(o Options) *reserved {
	t, _ := o.Catalog.Lookup(o.Reserved.Type)
	r := &reserved{typ: t, price: o.Reserved.price(t), nodes: o.Reserved.Nodes}
	for range r.nodes {
		r.free = append(r.free, &node{off: Plan{Type: t, Nodes: 1}, gpus: t.GPUs, state: nodeIdle, reserved: true, warmFrom: -1})
	}
	return r
}

// freeFor counts the free reserved nodes of class cl (they count as warm
// nodes to the warm pool: it launches none while reserved nodes wait).
func (e *elastic) freeFor(cl *classPool) int {
	if e.res == nil || e.res.class != cl.key {
		return 0
	}
	return len(e.res.free)
}

// takeReserved gives a job reserved nodes when its ranking names the
// reserved type and enough are free: the reservation comes before any
// spot or on-demand offering (it is paid anyway).
func (e *elastic) takeReserved(js *jobState, offs []Plan, cl *classPool) bool {
	r := e.res
	if r == nil {
		return false
	}
	for _, o := range offs {
		if o.Type.Name != r.typ.Name {
			continue
		}
		r.class = cl.key
		if len(r.free) < o.Nodes {
			return false
		}
		js.nodes, js.pending = js.nodes[:0], 0
		for range o.Nodes {
			n := r.free[len(r.free)-1]
			r.free = r.free[:len(r.free)-1]
			n.class, n.state, n.job, n.idleSince = cl, nodeBusy, js, e.c.now
			n.gen++
			js.nodes = append(js.nodes, n)
		}
		r.jobs++
		return true
	}
	return false
}

// freeReserved returns a reserved node whose job ended to the reservation.
func (e *elastic) freeReserved(n *node) {
	e.res.busySec += e.c.now - n.idleSince // idleSince holds when it was taken
	n.state, n.job, n.idleSince = nodeIdle, nil, e.c.now
	n.gen++
	e.res.free = append(e.res.free, n)
}

// close ends the reservation's window at end and bills it whole: the
// cost, the GPU-hours billed, and the chart (the bill accrues linearly over
// the window, the reserved GPUs are billed throughout it).
func (r *reserved) close(tl *tally, end float64) {
	r.heldSec = end
	r.bill = float64(r.nodes) * r.price * end / 3600
	tl.cost += r.bill
	tl.gpuSecBilled += float64(r.nodes*r.typ.GPUs) * end
	for i := range tl.series {
		s := &tl.series[i]
		at := min(s.At.Seconds(), end)
		s.CostUSD += float64(r.nodes) * r.price * at / 3600
		if s.At.Seconds() <= end {
			s.GPUs += r.nodes * r.typ.GPUs
		}
	}
}

// result is the reservation's figures against burst's cost with none.
func (r *reserved) result(kind string, with, without float64) ReservationResult {
	rr := ReservationResult{
		Kind: kind, Type: r.typ.Name, Nodes: r.nodes, USDPerHour: r.price,
		HeldHours: r.heldSec / 3600, BillUSD: r.bill, UsedNodeHours: r.busySec / 3600, Jobs: r.jobs,
		CostWithUSD: with, CostWithoutUSD: without, SavedUSD: without - with,
	}
	if held := float64(r.nodes) * r.heldSec; held > 0 {
		rr.UtilisationPct = 100 * r.busySec / held
		rr.IdleCostUSD = r.bill * (1 - r.busySec/held)
	}
	if nh := float64(r.nodes) * r.heldSec / 3600; nh > 0 {
		rr.BreakEvenUSDPerHour = (without - (with - r.bill)) / nh
	}
	if without > 0 {
		rr.SavedPct = 100 * rr.SavedUSD / without
	}
	return rr
}
