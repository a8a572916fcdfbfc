// Package healthwatch is burst-agent's GPU health monitor. Every pass it
// waits on the GPUs' event sets and reads their health counters
// (gpu.HealthReader), checks the GPU count and model against the node's
// class, classifies each finding with internal/gpuhealth's table and acts:
//
//   - replace (the hardware is bad): the event is reported to the sizer at
//     once, then the node is evacuated like on a spot notice
//     (internal/interruption: drained with the event as its reason, e.g.
//     "gpu: Xid 79 on GPU 3 (0000:b3:00.0)", jobs checkpoint-signalled and
//     requeued, the node handed back, so its instance is terminated and a
//     drained node is never kept warm); the monitor then stops;
//   - note (the job's own fault): reported with the node's jobs, nothing
//     else;
//   - ignore: reported only.
//
// Each finding is reported once per agent run. A clock slowdown counts
// only once it has lasted SlowdownAfter; NVLink errors only once their
// counters grew by NVLinkErrors since the agent started.
package healthwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/burst-hpc/burst/agent/gpu"
	"github.com/burst-hpc/burst/internal/gpuhealth"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// GPUs is what the monitor reads.
type GPUs interface {
	Devices() ([]gpu.Device, error)
	gpu.HealthReader
}

// Evacuator runs the spot-notice sequence for another cause
// (*interruption.Handler).
type Evacuator interface {
	Evacuate(ctx context.Context, n interruption.Notice, why string) (sizerapi.Event, error)
}

// Recorder takes the health reports (a *telemetry.Reporter).
type Recorder interface {
	Add(sizerapi.Record) error
	Flush(ctx context.Context) error
}

// Options configure a Monitor.
type Options struct {
	Node       string
	InstanceID string
	// ExpectGPUs and ExpectModel are the node's class (its instance type
	// in the catalog); 0 and "" check nothing.
	ExpectGPUs  int
	ExpectModel string
	// Table classifies; default the defaults.
	Table *gpuhealth.Table
	// Wait is each pass's wait on the event sets; default 5 s.
	Wait time.Duration
	// SlowdownAfter: a hardware slowdown lasting this long is an event;
	// default 5 min.
	SlowdownAfter time.Duration
	// NVLinkErrors: growth of a GPU's NVLink error counters that is an
	// event; default 100.
	NVLinkErrors uint64
	// Jobs lists the node's jobs (for the report); may be nil.
	Jobs   func(ctx context.Context) ([]uint32, error)
	Now    func() time.Time
	Logger *slog.Logger
}

// Monitor watches one node's GPUs.
type Monitor struct {
	gpus GPUs
	ev   Evacuator
	rec  Recorder
	o    Options
	log  *slog.Logger

	seen      map[string]bool
	slowSince map[int]time.Time
	nvBase    map[int]uint64
	passes    int
}

// New returns a Monitor. rec may be nil (nothing is reported).
func New(g GPUs, ev Evacuator, rec Recorder, o Options) (*Monitor, error) {
	if g == nil || ev == nil || o.Node == "" {
		return nil, errors.New("creating the GPU health monitor: GPUs, an evacuator and the node name are required")
	}
	if o.Table == nil {
		o.Table = gpuhealth.NewTable(gpuhealth.Overrides{})
	}
	if o.Wait <= 0 {
		o.Wait = 5 * time.Second
	}
	if o.SlowdownAfter <= 0 {
		o.SlowdownAfter = 5 * time.Minute
	}
	if o.NVLinkErrors == 0 {
		o.NVLinkErrors = 100
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Monitor{gpus: g, ev: ev, rec: rec, o: o, log: o.Logger.With("component", "gpuhealth"),
		seen: map[string]bool{}, slowSince: map[int]time.Time{}, nvBase: map[int]uint64{}}, nil
}

// Run checks until ctx ends or the node was evacuated.
func (m *Monitor) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		done, err := m.Check(ctx)
		if err != nil {
			m.log.Warn("checking GPU health", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(m.o.Wait):
			}
		}
		if done {
			return nil
		}
	}
	return nil
}

// Findings reads the GPUs once and returns the findings that count now
// (slowdown and NVLink thresholds applied), not yet deduplicated. The boot
// gate uses it on its own.
func (m *Monitor) Findings(ctx context.Context, wait time.Duration) ([]gpuhealth.Event, error) {
	now := m.o.Now()
	var out []gpuhealth.Event
	devs, derr := m.gpus.Devices()
	if derr == nil {
		out = append(out, CheckClass(devs, m.o.ExpectGPUs, m.o.ExpectModel, now)...)
	}
	evs, err := m.gpus.Health(ctx, wait)
	if err != nil {
		return out, errors.Join(derr, fmt.Errorf("reading GPU health: %w", err))
	}
	slow := map[int]bool{}
	first := m.passes == 0
	m.passes++
	for _, e := range evs {
		switch e.Kind {
		case gpuhealth.KindSlowdown:
			slow[e.GPU] = true
			since, ok := m.slowSince[e.GPU]
			if !ok {
				m.slowSince[e.GPU] = now
				continue
			}
			if d := now.Sub(since); d >= m.o.SlowdownAfter {
				e.Detail = fmt.Sprintf("%s for %s", e.Detail, d.Truncate(time.Second))
				out = append(out, e)
			}
		case gpuhealth.KindNVLink:
			base, ok := m.nvBase[e.GPU]
			if !ok && first {
				m.nvBase[e.GPU] = e.Count // errors from before this agent
				continue
			}
			if e.Count >= base+m.o.NVLinkErrors {
				e.Detail = fmt.Sprintf("%d NVLink errors since the agent started", e.Count-base)
				out = append(out, e)
			}
		default:
			out = append(out, e)
		}
	}
	for g := range m.slowSince {
		if !slow[g] {
			delete(m.slowSince, g) // not sustained: starts over
		}
	}
	return out, derr
}

// CheckClass compares the GPUs found with the node's class: fewer GPUs
// than want (0: not checked) is a KindCount event, a GPU whose name does
// not contain model (case-insensitive; "": not checked) a KindModel event.
func CheckClass(devs []gpu.Device, want int, model string, now time.Time) []gpuhealth.Event {
	var out []gpuhealth.Event
	if want > 0 && len(devs) < want {
		out = append(out, gpuhealth.Event{Time: now, Kind: gpuhealth.KindCount, GPU: -1, Count: uint64(len(devs)),
			Detail: fmt.Sprintf("%d GPUs, the class has %d", len(devs), want)})
	}
	if model != "" {
		for _, d := range devs {
			if !strings.Contains(strings.ToLower(d.Name), strings.ToLower(model)) {
				out = append(out, gpuhealth.Event{Time: now, Kind: gpuhealth.KindModel, GPU: d.Index, UUID: d.UUID,
					Detail: fmt.Sprintf("%s, the class has %s", d.Name, model)})
			}
		}
	}
	return out
}

// Check is one pass: it reports each new finding and, on the first that
// means the hardware is bad, evacuates the node (done is then true).
func (m *Monitor) Check(ctx context.Context) (done bool, err error) {
	evs, err := m.Findings(ctx, m.o.Wait)
	var replace *gpuhealth.Event
	for _, e := range evs {
		if m.seen[e.Key()] {
			continue
		}
		m.seen[e.Key()] = true
		action, why := m.o.Table.Classify(e)
		log := m.log.With("event", e.What(), "gpu", e.GPU, "bus_id", e.BusID, "uuid", e.UUID, "count", e.Count, "detail", e.Detail, "action", action, "why", why)
		switch action {
		case gpuhealth.Replace:
			log.Error("GPU fault: the hardware is bad; replacing the node")
			if replace == nil {
				e := e
				replace = &e
				continue // reported below with the reason
			}
		case gpuhealth.Note:
			log.Warn("GPU event noted (the job's own fault, or not worth a new instance)")
		default:
			log.Info("GPU event ignored by the table")
		}
		m.report(ctx, e, action, "", false)
	}
	if replace == nil {
		return false, err
	}
	reason := replace.Reason()
	m.report(ctx, *replace, gpuhealth.Replace, reason, true)
	_, eerr := m.ev.Evacuate(ctx, interruption.Notice{Node: m.o.Node, InstanceID: m.o.InstanceID, Action: "gpu_fault", Reason: reason, Time: m.o.Now()}, reason)
	if eerr != nil {
		m.log.Error("evacuating the node after the GPU fault", "reason", reason, "err", eerr)
	}
	return true, errors.Join(err, eerr)
}

func (m *Monitor) report(ctx context.Context, e gpuhealth.Event, a gpuhealth.Action, reason string, flush bool) {
	if m.rec == nil {
		return
	}
	h := ToReport(e, a, reason)
	if m.o.Jobs != nil {
		if ids, err := m.o.Jobs(ctx); err == nil {
			h.Jobs = ids
		}
	}
	if err := m.rec.Add(sizerapi.Record{Time: m.o.Now(), Kind: sizerapi.KindGPUHealth, Health: &h}); err != nil {
		m.log.Error("recording the GPU health event", "err", err)
		return
	}
	if !flush && a != gpuhealth.Note {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.rec.Flush(fctx); err != nil {
		m.log.Warn("sending the GPU health report failed; it stays spooled", "err", err)
	}
}

// ToReport is the sizer's form of e.
func ToReport(e gpuhealth.Event, a gpuhealth.Action, reason string) sizerapi.GPUHealth {
	return sizerapi.GPUHealth{Time: e.Time.UTC(), Kind: string(e.Kind), GPU: e.GPU, UUID: e.UUID, BusID: e.BusID, Xid: e.Xid,
		Count: e.Count, Detail: e.Detail, Action: string(a), Reason: reason}
}

// Gate checks the GPUs once, as the boot gate does: it returns the first
// finding the table says to replace the node for (ok false), or ok true.
// o's Node may be empty; nothing is reported or evacuated.
func Gate(ctx context.Context, g GPUs, o Options, wait time.Duration) (bad gpuhealth.Event, ok bool, err error) {
	if o.Node == "" {
		o.Node = "gate"
	}
	m, err := New(g, noEvac{}, nil, o)
	if err != nil {
		return gpuhealth.Event{}, false, err
	}
	evs, err := m.Findings(ctx, wait)
	for _, e := range evs {
		if a, _ := m.o.Table.Classify(e); a == gpuhealth.Replace {
			return e, false, nil
		}
	}
	if err != nil {
		return gpuhealth.Event{}, false, err
	}
	return gpuhealth.Event{}, true, nil
}

type noEvac struct{}

func (noEvac) Evacuate(context.Context, interruption.Notice, string) (sizerapi.Event, error) {
	return sizerapi.Event{}, nil
}
