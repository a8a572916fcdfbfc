// Package blockwatch keeps jobs within the Capacity Blocks for ML their
// nodes run in (burst-sizer serve runs it). EC2 begins terminating a
// block's instances 30 minutes before the block ends
// (capacity.BlockReclaimLead), and emits its Capacity Block Expiration
// Warning ten minutes before that (EC2 User Guide, "Monitor Capacity Blocks
// using EventBridge"). Each pass, for every live instance in a block:
//
//   - Fence: a Slurm maintenance reservation on the node from the warning
//     (Lead before the reclaim) to the block's end
//     (slurm.Scontrol.CreateMaintReservation), so that Slurm starts no
//     job on the node whose time limit would run into it. burst-resume
//     puts a job on a block only if it fits (internal/lifecycle); the fence
//     covers the jobs Slurm starts on the node while it is up.
//   - Notice: from the warning on, the node's jobs are checkpoint-signalled
//     and requeued and the node is handed back, as for a spot notice
//     (interruption.Handler.Evacuate), once per instance.
package blockwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Cloud lists the cluster's instances and describes reservations (the EC2
// provider).
type Cloud interface {
	List(ctx context.Context) ([]cloud.Instance, error)
	Reservations(ctx context.Context, ids []string) ([]cloud.Reservation, error)
}

// Evacuator checkpoints, requeues and hands back a node's jobs
// (*interruption.Handler).
type Evacuator interface {
	Evacuate(ctx context.Context, n interruption.Notice, why string) (sizerapi.Event, error)
}

// Fencer makes Slurm maintenance reservations (*slurm.Scontrol).
type Fencer interface {
	CreateMaintReservation(ctx context.Context, name string, nodes []string, start, end time.Time) error
}

// DefaultLead is how long before the reclaim the node is evacuated: at
// EC2's warning, 40 minutes before the block's end (the time limit
// burst-resume fits a block's jobs to, internal/lifecycle).
const DefaultLead = capacity.BlockNoticeLead - capacity.BlockReclaimLead

// Options configure a Watcher.
type Options struct {
	// Blocks are the Capacity Blocks burst.yaml names; the blocks the
	// instances run in are watched too.
	Blocks []string
	// Lead before the reclaim is when jobs are evacuated and the fence
	// begins; default DefaultLead.
	Lead time.Duration
	// Interval between passes (Run); default 30 s.
	Interval time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
	// Fence, when set, is asked before each pass (sizer/store's Fence:
	// whether this sizer still leads); on an error the pass acts on
	// nothing, so a deposed leader neither reserves nodes nor evacuates
	// jobs the new leader handles.
	Fence func(context.Context) error
}

// Watcher watches the cluster's instances in Capacity Blocks.
type Watcher struct {
	cloud Cloud
	evac  Evacuator
	fence Fencer
	o     Options
	log   *slog.Logger

	mu        sync.Mutex
	fenced    map[string]bool // instance ids
	evacuated map[string]bool
	wg        sync.WaitGroup
}

// New returns a Watcher.
func New(c Cloud, evac Evacuator, fence Fencer, o Options) (*Watcher, error) {
	if c == nil || evac == nil || fence == nil {
		return nil, errors.New("creating the Capacity Block watcher: the cloud, the evacuator and the fencer are all required")
	}
	if o.Lead <= 0 {
		o.Lead = DefaultLead
	}
	if o.Interval <= 0 {
		o.Interval = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{cloud: c, evac: evac, fence: fence, o: o, log: o.Logger.With("component", "blockwatch"),
		fenced: map[string]bool{}, evacuated: map[string]bool{}}, nil
}

// Run passes every Interval until ctx ends, then waits for the evacuations
// under way.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.o.Interval)
	defer t.Stop()
	for {
		if err := w.Pass(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("Capacity Block pass failed; trying again next pass", "err", err)
		}
		select {
		case <-ctx.Done():
			w.wg.Wait()
			return
		case <-t.C:
		}
	}
}

// Pass fences and, when their block's end is near, evacuates the nodes of
// the live instances in Capacity Blocks. Evacuations run in the
// background (Run waits for them at its end).
func (w *Watcher) Pass(ctx context.Context) error {
	if w.o.Fence != nil {
		if err := w.o.Fence(ctx); err != nil {
			return fmt.Errorf("not acting on Capacity Blocks: %w", err)
		}
	}
	insts, err := w.cloud.List(ctx)
	if err != nil {
		return fmt.Errorf("listing the cluster's instances: %w", err)
	}
	ids := slices.Clone(w.o.Blocks)
	var inBlocks []cloud.Instance
	for _, in := range insts {
		if in.Live() && in.Reservation != "" && in.Node != "" {
			ids = append(ids, in.Reservation)
			inBlocks = append(inBlocks, in)
		}
	}
	if len(inBlocks) == 0 {
		return nil
	}
	slices.Sort(ids)
	rs, err := w.cloud.Reservations(ctx, slices.Compact(ids))
	if err != nil {
		return fmt.Errorf("describing capacity reservations: %w", err)
	}
	blocks := map[string]cloud.Reservation{}
	for _, r := range rs {
		if r.Type == capacity.BlockType && !r.End.IsZero() {
			blocks[r.ID] = r
		}
	}
	var errs []error
	now := w.o.Now()
	for _, in := range inBlocks {
		b, ok := blocks[in.Reservation]
		if !ok {
			continue
		}
		reclaim := b.End.Add(-capacity.BlockReclaimLead)
		warn := reclaim.Add(-w.o.Lead)
		if err := w.fenceOnce(ctx, in, b, warn); err != nil {
			errs = append(errs, err)
		}
		if !now.Before(warn) {
			w.evacuateOnce(ctx, in, b, now, reclaim)
		}
	}
	return errors.Join(errs...)
}

// fenceOnce makes the node's maintenance reservation for the instance,
// once (an existing one of the same name counts: a restarted sizer).
func (w *Watcher) fenceOnce(ctx context.Context, in cloud.Instance, b cloud.Reservation, warn time.Time) error {
	w.mu.Lock()
	done := w.fenced[in.ID]
	w.mu.Unlock()
	if done || !w.o.Now().Before(b.End) {
		return nil
	}
	name := FenceName(in.ID)
	err := w.fence.CreateMaintReservation(ctx, name, []string{in.Node}, warn, b.End)
	if err != nil && !errors.Is(err, slurm.ErrReservationExists) {
		return fmt.Errorf("fencing node %s before Capacity Block %s ends: %w", in.Node, b.ID, err)
	}
	w.mu.Lock()
	w.fenced[in.ID] = true
	w.mu.Unlock()
	if err == nil {
		w.log.Info("node fenced: no job starts that would run into the Capacity Block's reclaim", "node", in.Node, "instance_id", in.ID,
			"reservation", b.ID, "slurm_reservation", name, "from", warn, "to", b.End)
	}
	return nil
}

// evacuateOnce starts the node's evacuation, once per instance.
func (w *Watcher) evacuateOnce(ctx context.Context, in cloud.Instance, b cloud.Reservation, now, reclaim time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.evacuated[in.ID] {
		return
	}
	w.evacuated[in.ID] = true
	n := interruption.Notice{Node: in.Node, InstanceID: in.ID, Action: NoticeAction, Time: now, Deadline: reclaim,
		Reason: fmt.Sprintf("burst: capacity block %s ends %s", b.ID, b.End.UTC().Format(time.RFC3339))}
	w.log.Warn("Capacity Block ending: evacuating the node", "node", in.Node, "instance_id", in.ID, "reservation", b.ID, "reclaim", reclaim, "end", b.End)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if _, err := w.evac.Evacuate(context.WithoutCancel(ctx), n, "capacity block ending"); err != nil {
			w.log.Error("evacuating a node before its Capacity Block ends", "node", in.Node, "err", err)
		}
	}()
}

// NoticeAction is the Action of a Capacity Block's notice.
const NoticeAction = "capacity-block-end"

// FenceName is the Slurm reservation that fences instance id's node.
func FenceName(instanceID string) string { return "burst_block_" + instanceID }
