package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/burst-hpc/burst/internal/gpuhealth"
)

// health is the simulated GPUs' fault state.
type health struct {
	applied  int                         // fault file entries applied
	xids     []gpuhealth.Event           // pending Xid events
	counters []map[gpuhealth.Kind]uint64 // per GPU
	lost     []bool                      // per GPU
	visible  int                         // GPUs Devices shows (gpu_count)
}

func newHealth(gpus int) health {
	h := health{counters: make([]map[gpuhealth.Kind]uint64, gpus), lost: make([]bool, gpus), visible: gpus}
	for i := range h.counters {
		h.counters[i] = map[gpuhealth.Kind]uint64{}
	}
	return h
}

// BusID is simulated GPU i's PCI bus id.
func BusID(i int) string { return fmt.Sprintf("0000:%02x:00.0", 0x10+i) }

// Inject applies one fault now (see Fault). It is what the fault file does,
// for unit tests and demos in the same process.
func (r *Reader) Inject(f Fault) error {
	var buf FaultFile
	buf.Faults = []Fault{f}
	if _, err := validate(buf, r.opts.GPUs); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.apply(f)
	return nil
}

func validate(f FaultFile, gpus int) (FaultFile, error) {
	b, err := jsonOf(f)
	if err != nil {
		return FaultFile{}, err
	}
	return ParseFaults(b, gpus)
}

// apply: the caller holds r.mu.
func (r *Reader) apply(f Fault) {
	h := &r.health
	switch f.Kind {
	case gpuhealth.KindXid:
		h.xids = append(h.xids, gpuhealth.Event{Time: r.opts.Now(), Kind: gpuhealth.KindXid, GPU: f.GPU, UUID: r.uuid(f.GPU), BusID: BusID(f.GPU), Xid: f.Xid})
	case gpuhealth.KindCount:
		h.visible = int(f.Count)
	case gpuhealth.KindLost:
		h.lost[f.GPU] = true
	default:
		n := f.Count
		if n == 0 {
			n = 1
		}
		h.counters[f.GPU][f.Kind] += n
	}
}

// loadFaults applies the fault file's new entries (Options.FaultFile).
func (r *Reader) loadFaults() error {
	if r.opts.FaultFile == "" {
		return nil
	}
	ff, err := ReadFaultFile(r.opts.FaultFile, r.opts.GPUs)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range ff.Faults[min(r.health.applied, len(ff.Faults)):] {
		if f.Instance == "" || f.Instance == r.opts.InstanceID {
			r.apply(f)
		}
	}
	r.health.applied = max(r.health.applied, len(ff.Faults))
	return nil
}

// Health implements gpu.HealthReader: injected Xids come once, counters
// and lost GPUs on every call. It waits up to wait for an Xid (checking
// the fault file every 200 ms).
func (r *Reader) Health(ctx context.Context, wait time.Duration) ([]gpuhealth.Event, error) {
	deadline := time.Now().Add(wait)
	for {
		if err := r.loadFaults(); err != nil {
			return nil, err
		}
		r.mu.Lock()
		pending := len(r.health.xids)
		r.mu.Unlock()
		if pending > 0 || !time.Now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(200*time.Millisecond, time.Until(deadline))):
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.health.xids
	r.health.xids = nil
	now := r.opts.Now()
	for i := 0; i < r.health.visible; i++ {
		if r.health.lost[i] {
			out = append(out, gpuhealth.Event{Time: now, Kind: gpuhealth.KindLost, GPU: i, UUID: r.uuid(i), BusID: BusID(i), Detail: "simulated"})
			continue
		}
		for _, k := range gpuhealth.Kinds {
			if n := r.health.counters[i][k]; n > 0 {
				out = append(out, gpuhealth.Event{Time: now, Kind: k, GPU: i, UUID: r.uuid(i), BusID: BusID(i), Count: n})
			}
		}
	}
	return out, nil
}
