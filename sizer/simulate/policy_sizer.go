package simulate

import (
	"fmt"
	"strings"
	"sync"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizing"
)

// PolicySizer is the Sizer backed by burst's sizing policy (internal/sizing):
// Route picks the node class at submission, Rank orders the class's
// offerings (spot and on-demand, by expected price per useful hour). Nothing
// of the policy is re-implemented here; this type only translates a trace
// job into a sizing.Request and caches answers (the policy is pure, so equal
// requests get equal answers).
type PolicySizer struct {
	pol   *sizing.Policy
	cat   *catalog.Catalog
	mu    sync.Mutex
	cache map[sizerKey]cached
}

type sizerKey struct {
	model      string
	gpus       int
	metadata   string
	onDemand   bool
	checkpoint int64
	avoid      string
	zones      string
}

type cached struct {
	offs []Plan
	err  error
}

// NewPolicySizer builds the policy over cat with one class per (GPU model,
// GPUs per instance) of the catalog (sizing.ClassesFromCatalog), spot then
// on-demand, in catalog.PriceRegion, with sizing.DefaultParams.
func NewPolicySizer(cat *catalog.Catalog) (*PolicySizer, error) {
	p, err := sizing.New(cat, catalog.PriceRegion, sizing.ClassesFromCatalog(cat), sizing.DefaultParams())
	if err != nil {
		return nil, fmt.Errorf("building the sizing policy from the catalog: %w", err)
	}
	return &PolicySizer{pol: p, cat: cat, cache: map[sizerKey]cached{}}, nil
}

// maxGPUsPerNode is the most GPUs one instance of the model has.
func maxGPUsPerNode(cat *catalog.Catalog, model string) int {
	m := 0
	for _, t := range cat.Matching(catalog.Shape{GPUModel: model, GPUs: 1}) {
		m = max(m, t.GPUs)
	}
	return m
}

// NodeShape turns a trace job's total GPUs into what its sbatch would ask
// for: one node when the GPUs fit the model's largest instance, else the
// fewest nodes of at most that many GPUs, GPUs spread evenly
// (16 GPUs of a10g -> 2 nodes x 8; 12 -> 2 x 6).
func NodeShape(totalGPUs, maxPerNode int) (nodes, gpusPerNode int) {
	if maxPerNode < 1 || totalGPUs <= maxPerNode {
		return 1, totalGPUs
	}
	nodes = (totalGPUs + maxPerNode - 1) / maxPerNode
	return nodes, (totalGPUs + nodes - 1) / nodes
}

// Offerings implements Sizer.
func (s *PolicySizer) Offerings(r Request) ([]Plan, error) {
	k := sizerKey{model: r.GPUModel, gpus: r.Job.GPUs, metadata: r.Job.Metadata, onDemand: !r.AllowSpot, checkpoint: int64(r.Checkpoint), avoid: strings.Join(r.AvoidSpot, ","), zones: strings.Join(r.Zones, ",")}
	s.mu.Lock()
	c, ok := s.cache[k]
	s.mu.Unlock()
	if !ok {
		c.offs, c.err = s.offerings(r)
		s.mu.Lock()
		s.cache[k] = c
		s.mu.Unlock()
	}
	return append([]Plan(nil), c.offs...), c.err
}

func (s *PolicySizer) offerings(r Request) ([]Plan, error) {
	md, errs := jobmeta.ParseMetadata(r.Job.Metadata)
	if len(errs) > 0 {
		return nil, fmt.Errorf("job %s metadata: %w", r.Job.ID, errs[0])
	}
	switch {
	case md.Checkpoint > 0 || md.NoCheckpoint:
	case r.Checkpoint > 0:
		md.Checkpoint = r.Checkpoint
	case r.Checkpoint < 0:
		md.NoCheckpoint = true
	}
	if !r.AllowSpot {
		md.Capacity = capacity.OnDemand
	}
	nodes, gpn := NodeShape(r.Job.GPUs, maxGPUsPerNode(s.cat, r.GPUModel))
	req := sizing.Request{GPUModel: r.GPUModel, GPUsPerNode: gpn, Nodes: nodes, Metadata: md}
	var unavail []sizing.Unavailable
	for _, t := range r.AvoidSpot {
		unavail = append(unavail, sizing.Unavailable{InstanceType: t, Capacity: capacity.Spot, Reason: "spot interruption"})
	}
	d, err := s.pol.Route(sizing.RouteInput{Request: req, Unavailable: unavail})
	if err != nil {
		return nil, fmt.Errorf("routing: %w", err)
	}
	if d.Refused {
		return nil, fmt.Errorf("routing: refused: %s", d.RefuseMessage)
	}
	ranked, err := s.pol.Rank(sizing.RankInput{Class: d.Class, Request: req, Unavailable: unavail, Zones: r.Zones})
	if err != nil {
		return nil, fmt.Errorf("ranking class %s: %w", d.Class, err)
	}
	out := make([]Plan, 0, len(ranked))
	for _, o := range ranked {
		t, ok := s.cat.Lookup(o.InstanceType)
		if !ok {
			return nil, fmt.Errorf("ranking class %s: offering %s is not in the catalog", d.Class, o.InstanceType)
		}
		out = append(out, Plan{Class: d.Class, Type: t, Zone: o.Zone, Spot: o.Capacity == capacity.Spot, Nodes: d.Nodes, USDPerHour: o.PriceUSD})
	}
	return out, nil
}
