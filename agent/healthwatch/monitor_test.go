package healthwatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/agent/gpu/sim"
	"github.com/burst-hpc/burst/internal/gpuhealth"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

type evac struct {
	notices []interruption.Notice
}

func (e *evac) Evacuate(_ context.Context, n interruption.Notice, why string) (sizerapi.Event, error) {
	e.notices = append(e.notices, n)
	return sizerapi.Event{}, nil
}

type recorder struct {
	mu      sync.Mutex
	recs    []sizerapi.Record
	flushed int // records sent at the last flush
}

func (r *recorder) Add(rec sizerapi.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

func (r *recorder) Flush(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushed = len(r.recs)
	return nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func setup(t *testing.T, o Options) (*sim.Reader, *Monitor, *evac, *recorder, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)}
	r, err := sim.New(sim.Options{GPUs: 8, Name: "Simulated NVIDIA H100 80GB HBM3", Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	ev, rec := &evac{}, &recorder{}
	o.Node, o.InstanceID, o.Now, o.Wait = "gpu-1", "i-0abc", c.now, time.Millisecond
	o.Jobs = func(context.Context) ([]uint32, error) { return []uint32{42}, nil }
	m, err := New(r, ev, rec, o)
	if err != nil {
		t.Fatal(err)
	}
	return r, m, ev, rec, c
}

func check(t *testing.T, m *Monitor) bool {
	t.Helper()
	done, err := m.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return done
}

func TestMonitorActions(t *testing.T) {
	for _, tc := range []struct {
		name       string
		o          Options
		faults     []sim.Fault
		wantReason string // "" no evacuation
		wantKind   gpuhealth.Kind
		wantAction gpuhealth.Action
	}{
		{name: "healthy", o: Options{ExpectGPUs: 8, ExpectModel: "h100"}},
		{name: "xid 79", faults: []sim.Fault{{Kind: gpuhealth.KindXid, GPU: 3, Xid: 79}},
			wantReason: "gpu: Xid 79 on GPU 3 (0000:13:00.0)", wantKind: gpuhealth.KindXid, wantAction: gpuhealth.Replace},
		{name: "xid 13 is the job's", faults: []sim.Fault{{Kind: gpuhealth.KindXid, GPU: 0, Xid: 13}},
			wantKind: gpuhealth.KindXid, wantAction: gpuhealth.Note},
		{name: "lost GPU", faults: []sim.Fault{{Kind: gpuhealth.KindLost, GPU: 2}},
			wantReason: "gpu: gpu_lost on GPU 2 (0000:12:00.0)", wantKind: gpuhealth.KindLost, wantAction: gpuhealth.Replace},
		{name: "uncorrected ECC", faults: []sim.Fault{{Kind: gpuhealth.KindECCVolatile, GPU: 1, Count: 1}},
			wantReason: "gpu: ecc_uncorrected_volatile on GPU 1 (0000:11:00.0)", wantKind: gpuhealth.KindECCVolatile, wantAction: gpuhealth.Replace},
		{name: "aggregate ECC noted", faults: []sim.Fault{{Kind: gpuhealth.KindECCAggregate, GPU: 1, Count: 4}},
			wantKind: gpuhealth.KindECCAggregate, wantAction: gpuhealth.Note},
		{name: "row remap failed", faults: []sim.Fault{{Kind: gpuhealth.KindRowRemapFailed, GPU: 5}},
			wantReason: "gpu: row_remap_failed on GPU 5 (0000:15:00.0)", wantKind: gpuhealth.KindRowRemapFailed, wantAction: gpuhealth.Replace},
		{name: "wrong GPU count", o: Options{ExpectGPUs: 8}, faults: []sim.Fault{{Kind: gpuhealth.KindCount, Count: 7}},
			wantReason: "gpu: gpu_count (7 GPUs, the class has 8)", wantKind: gpuhealth.KindCount, wantAction: gpuhealth.Replace},
		{name: "wrong model", o: Options{ExpectModel: "a100"},
			wantReason: "gpu: gpu_model on GPU 0", wantKind: gpuhealth.KindModel, wantAction: gpuhealth.Replace},
		{name: "operator ignores xid 79", o: Options{Table: gpuhealth.NewTable(gpuhealth.Overrides{Xid: map[uint64]gpuhealth.Action{79: gpuhealth.Ignore}})},
			faults: []sim.Fault{{Kind: gpuhealth.KindXid, GPU: 3, Xid: 79}}, wantKind: gpuhealth.KindXid, wantAction: gpuhealth.Ignore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, m, ev, rec, _ := setup(t, tc.o)
			for _, f := range tc.faults {
				if err := r.Inject(f); err != nil {
					t.Fatal(err)
				}
			}
			done := check(t, m)
			if done != (tc.wantReason != "") {
				t.Fatalf("done = %v, evacuations %+v", done, ev.notices)
			}
			if tc.wantReason != "" {
				if len(ev.notices) != 1 || ev.notices[0].Reason != tc.wantReason || ev.notices[0].Node != "gpu-1" || ev.notices[0].InstanceID != "i-0abc" {
					t.Fatalf("evacuations %+v, want one with reason %q", ev.notices, tc.wantReason)
				}
			} else if len(ev.notices) != 0 {
				t.Fatalf("evacuated: %+v", ev.notices)
			}
			if tc.wantKind == "" {
				if len(rec.recs) != 0 {
					t.Fatalf("reports %+v", rec.recs)
				}
				return
			}
			if len(rec.recs) == 0 {
				t.Fatal("nothing reported")
			}
			last := rec.recs[len(rec.recs)-1] // the replace report comes last, with the reason
			h := last.Health
			if last.Kind != sizerapi.KindGPUHealth || h == nil || h.Kind != string(tc.wantKind) || h.Action != string(tc.wantAction) ||
				h.Reason != tc.wantReason || len(h.Jobs) != 1 || h.Jobs[0] != 42 {
				t.Fatalf("report %+v", h)
			}
			if tc.wantAction == gpuhealth.Replace && rec.flushed != len(rec.recs) {
				t.Errorf("the replace report was not flushed before the evacuation")
			}
			// reported once however often it is seen
			n := len(rec.recs)
			if !done {
				check(t, m)
				if len(rec.recs) != n {
					t.Errorf("reported again: %+v", rec.recs[n:])
				}
			}
		})
	}
}

func TestMonitorSustainedSlowdown(t *testing.T) {
	r, m, ev, _, c := setup(t, Options{SlowdownAfter: time.Minute})
	r.Inject(sim.Fault{Kind: gpuhealth.KindSlowdown, GPU: 4, Count: 64})
	if check(t, m) {
		t.Fatal("evacuated on the first slowdown reading")
	}
	c.t = c.t.Add(30 * time.Second)
	if check(t, m) {
		t.Fatal("evacuated after 30 s of slowdown")
	}
	c.t = c.t.Add(31 * time.Second)
	if !check(t, m) || len(ev.notices) != 1 || ev.notices[0].Reason != "gpu: clock_slowdown on GPU 4 (0000:14:00.0)" {
		t.Fatalf("after 61 s: %+v", ev.notices)
	}
}

func TestMonitorNVLinkGrowth(t *testing.T) {
	r, m, ev, _, _ := setup(t, Options{NVLinkErrors: 100})
	r.Inject(sim.Fault{Kind: gpuhealth.KindNVLink, GPU: 6, Count: 50}) // from before the agent
	if check(t, m) {
		t.Fatal("evacuated on the errors found at start")
	}
	r.Inject(sim.Fault{Kind: gpuhealth.KindNVLink, GPU: 6, Count: 60})
	if check(t, m) {
		t.Fatal("evacuated on 60 new errors")
	}
	r.Inject(sim.Fault{Kind: gpuhealth.KindNVLink, GPU: 6, Count: 40})
	if !check(t, m) || len(ev.notices) != 1 {
		t.Fatalf("100 new errors: %+v", ev.notices)
	}
}

func TestCheckClass(t *testing.T) {
	r, _ := sim.New(sim.Options{GPUs: 4, Name: "NVIDIA A10G"})
	devs, _ := r.Devices()
	if evs := CheckClass(devs, 4, "a10g", time.Time{}); len(evs) != 0 {
		t.Errorf("matching class: %+v", evs)
	}
	if evs := CheckClass(devs, 8, "", time.Time{}); len(evs) != 1 || evs[0].Count != 4 || evs[0].GPU != -1 {
		t.Errorf("4 of 8: %+v", evs)
	}
	if evs := CheckClass(devs, 0, "h100", time.Time{}); len(evs) != 4 {
		t.Errorf("model h100 on a10g: %+v", evs)
	}
}

func TestGate(t *testing.T) {
	r, _ := sim.New(sim.Options{GPUs: 8, Name: "NVIDIA H100 80GB HBM3"})
	o := Options{ExpectGPUs: 8, ExpectModel: "h100"}
	if _, ok, err := Gate(context.Background(), r, o, 0); !ok || err != nil {
		t.Fatalf("healthy node refused: %v", err)
	}
	r.Inject(sim.Fault{Kind: gpuhealth.KindECCAggregate, GPU: 1, Count: 3}) // noted, not a reason
	if _, ok, _ := Gate(context.Background(), r, o, 0); !ok {
		t.Fatal("refused for an aggregate ECC count")
	}
	r.Inject(sim.Fault{Kind: gpuhealth.KindCount, Count: 7})
	bad, ok, err := Gate(context.Background(), r, o, 0)
	if ok || err != nil || bad.Kind != gpuhealth.KindCount || bad.Reason() != "gpu: gpu_count (7 GPUs, the class has 8)" {
		t.Fatalf("7 of 8 GPUs: %+v %v %v", bad, ok, err)
	}
}
