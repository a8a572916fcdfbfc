//go:build cgo

package gpu

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/burst-hpc/burst/internal/gpuhealth"
)

// healthyGPU is what every health read of a good GPU returns.
type healthyGPU struct {
	eccVol, eccAgg   uint64
	pagesPending     bool
	rowPend, rowFail bool
	nvlinkPerCounter uint64
	reasons          uint64
	lostAt           string // the NVML call that returns ERROR_GPU_IS_LOST
	noSupport        bool   // every counter ERROR_NOT_SUPPORTED
	oldDriver        bool   // no GetCurrentClocksEventReasons: the throttle reasons call
	armed            bool   // lostAt applies (after NewNVML enumerated the GPUs)
}

func (h *healthyGPU) install(md *mock.Device, bus string) {
	ret := func(op string) nvml.Return {
		if h.armed && h.lostAt == op {
			return nvml.ERROR_GPU_IS_LOST
		}
		if h.noSupport {
			return nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.SUCCESS
	}
	uuid := md.GetUUIDFunc
	md.GetUUIDFunc = func() (string, nvml.Return) {
		if h.armed && h.lostAt == "GetUUID" {
			return "", nvml.ERROR_GPU_IS_LOST
		}
		return uuid()
	}
	md.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for i, c := range bus {
			p.BusId[i] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	md.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	md.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	md.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if t != nvml.MEMORY_ERROR_TYPE_UNCORRECTED {
			return 99, nvml.SUCCESS // corrected errors are not faults
		}
		if c == nvml.VOLATILE_ECC {
			return h.eccVol, ret("GetTotalEccErrors")
		}
		return h.eccAgg, ret("GetTotalEccErrors")
	}
	md.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		if h.pagesPending {
			return nvml.FEATURE_ENABLED, ret("GetRetiredPagesPendingStatus")
		}
		return nvml.FEATURE_DISABLED, ret("GetRetiredPagesPendingStatus")
	}
	md.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		return 3, 1, h.rowPend, h.rowFail, ret("GetRemappedRows")
	}
	md.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if l >= 18 {
			return nvml.FEATURE_DISABLED, ret("GetNvLinkState")
		}
		return nvml.FEATURE_ENABLED, ret("GetNvLinkState")
	}
	md.GetNvLinkErrorCounterFunc = func(l int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		return h.nvlinkPerCounter, ret("GetNvLinkErrorCounter")
	}
	md.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		if h.oldDriver {
			return 0, nvml.ERROR_FUNCTION_NOT_FOUND
		}
		return h.reasons, ret("GetCurrentClocksEventReasons")
	}
	md.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) {
		return h.reasons, ret("GetCurrentClocksEventReasons")
	}
}

// healthServer is a DGX H100 mock whose GPU i behaves as gpus[i] (healthy
// when absent) and whose event set returns evs, then times out.
func healthServer(t *testing.T, gpus map[int]*healthyGPU, evs func(devs []nvml.Device) []nvml.EventData) (*NVML, *int) {
	t.Helper()
	s := dgxh100.New()
	var all []*healthyGPU
	for i, d := range s.Devices {
		h := gpus[i]
		if h == nil {
			h = &healthyGPU{}
		}
		all = append(all, h)
		h.install(&d.(*server.Device).Device, "00000000:"+strings.ToUpper([]string{"18", "2a", "3a", "5d", "9a", "ab", "ba", "db"}[i])+":00.0")
	}
	var queue []nvml.EventData
	if evs != nil {
		queue = evs(s.Devices)
	}
	freed := new(int)
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
				if len(queue) == 0 {
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
				e := queue[0]
				queue = queue[1:]
				return e, nvml.SUCCESS
			},
			FreeFunc: func() nvml.Return { *freed++; return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	n, err := NewNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range all {
		h.armed = true
	}
	return n, freed
}

func TestNVMLHealthEveryPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		gpus map[int]*healthyGPU
		evs  func([]nvml.Device) []nvml.EventData
		want []gpuhealth.Event // Kind, GPU, Xid, Count, BusID compared
	}{
		{name: "healthy"},
		{name: "unsupported counters", gpus: map[int]*healthyGPU{0: {noSupport: true}}},
		{name: "xid 79 from the event set", evs: func(d []nvml.Device) []nvml.EventData {
			return []nvml.EventData{{Device: d[3], EventType: nvml.EventTypeXidCriticalError, EventData: 79}}
		}, want: []gpuhealth.Event{{Kind: gpuhealth.KindXid, GPU: 3, Xid: 79, BusID: "0000:5d:00.0"}}},
		{name: "double-bit ECC event", evs: func(d []nvml.Device) []nvml.EventData {
			return []nvml.EventData{{Device: d[1], EventType: nvml.EventTypeDoubleBitEccError}}
		}, want: []gpuhealth.Event{{Kind: gpuhealth.KindECCVolatile, GPU: 1, Count: 1, BusID: "0000:2a:00.0"}}},
		{name: "single-bit ECC event ignored", evs: func(d []nvml.Device) []nvml.EventData {
			return []nvml.EventData{{Device: d[1], EventType: nvml.EventTypeSingleBitEccError}}
		}},
		{name: "uncorrected ECC", gpus: map[int]*healthyGPU{2: {eccVol: 2, eccAgg: 5}},
			want: []gpuhealth.Event{{Kind: gpuhealth.KindECCVolatile, GPU: 2, Count: 2, BusID: "0000:3a:00.0"}, {Kind: gpuhealth.KindECCAggregate, GPU: 2, Count: 5, BusID: "0000:3a:00.0"}}},
		{name: "retired pages pending", gpus: map[int]*healthyGPU{4: {pagesPending: true}},
			want: []gpuhealth.Event{{Kind: gpuhealth.KindRetiredPagesPending, GPU: 4, BusID: "0000:9a:00.0"}}},
		{name: "row remap pending", gpus: map[int]*healthyGPU{5: {rowPend: true}},
			want: []gpuhealth.Event{{Kind: gpuhealth.KindRowRemapPending, GPU: 5, Count: 1, BusID: "0000:ab:00.0"}}},
		{name: "row remap failed", gpus: map[int]*healthyGPU{5: {rowPend: true, rowFail: true}},
			want: []gpuhealth.Event{{Kind: gpuhealth.KindRowRemapFailed, GPU: 5, Count: 1, BusID: "0000:ab:00.0"}}},
		{name: "nvlink counters", gpus: map[int]*healthyGPU{6: {nvlinkPerCounter: 2}},
			// 18 active links x 5 counters x 2
			want: []gpuhealth.Event{{Kind: gpuhealth.KindNVLink, GPU: 6, Count: 180, BusID: "0000:ba:00.0"}}},
		{name: "thermal slowdown", gpus: map[int]*healthyGPU{7: {reasons: nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksEventReasonGpuIdle}},
			want: []gpuhealth.Event{{Kind: gpuhealth.KindSlowdown, GPU: 7, Count: nvml.ClocksThrottleReasonHwThermalSlowdown, BusID: "0000:db:00.0"}}},
		{name: "power brake on an older driver", gpus: map[int]*healthyGPU{7: {oldDriver: true, reasons: nvml.ClocksThrottleReasonHwPowerBrakeSlowdown}},
			want: []gpuhealth.Event{{Kind: gpuhealth.KindSlowdown, GPU: 7, Count: nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, BusID: "0000:db:00.0"}}},
		{name: "software power cap is not a slowdown", gpus: map[int]*healthyGPU{7: {reasons: nvml.ClocksEventReasonSwPowerCap}}},
		{name: "lost on first read", gpus: map[int]*healthyGPU{0: {lostAt: "GetUUID"}},
			want: []gpuhealth.Event{{Kind: gpuhealth.KindLost, GPU: 0, BusID: "0000:18:00.0"}}},
		{name: "lost mid-read", gpus: map[int]*healthyGPU{1: {eccVol: 1, lostAt: "GetRemappedRows"}},
			want: []gpuhealth.Event{{Kind: gpuhealth.KindECCVolatile, GPU: 1, Count: 1, BusID: "0000:2a:00.0"}, {Kind: gpuhealth.KindLost, GPU: 1, BusID: "0000:2a:00.0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, freed := healthServer(t, tc.gpus, tc.evs)
			got, err := n.Health(context.Background(), 10*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d events %+v, want %+v", len(got), got, tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Kind != w.Kind || g.GPU != w.GPU || g.Xid != w.Xid || g.Count != w.Count || g.BusID != w.BusID {
					t.Errorf("event %d: got %+v, want %+v", i, g, w)
				}
				if g.UUID == "" || g.Time.IsZero() {
					t.Errorf("event %d without UUID or time: %+v", i, g)
				}
			}
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
			if *freed != 1 {
				t.Errorf("event set freed %d times, want 1", *freed)
			}
		})
	}
}

func TestNVMLHealthRegistersEveryGPU(t *testing.T) {
	n, _ := healthServer(t, nil, nil)
	defer n.Close()
	k, err := n.RegisterHealthEvents()
	if err != nil || k != 8 {
		t.Fatalf("registered %d GPUs (%v), want 8", k, err)
	}
	if k2, _ := n.RegisterHealthEvents(); k2 != 8 {
		t.Errorf("second call registered %d", k2)
	}
}

func TestNVMLHealthEventSetFailures(t *testing.T) {
	s := dgxh100.New()
	for _, d := range s.Devices {
		(&healthyGPU{}).install(&d.(*server.Device).Device, "")
	}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_UNKNOWN }
	n, err := NewNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Health(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "creating the NVML event set") {
		t.Errorf("got %v, want the event set error", err)
	}
	set := &mock.EventSet{WaitFunc: func(uint32) (nvml.EventData, nvml.Return) { return nvml.EventData{}, nvml.ERROR_UNKNOWN },
		FreeFunc: func() nvml.Return { return nvml.SUCCESS }}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	if _, err := n.Health(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "waiting for GPU events") {
		t.Errorf("got %v, want the wait error", err)
	}
	n.Close()
}

func TestBusID(t *testing.T) {
	var raw [32]int8
	for i, c := range "00000000:B3:00.0" {
		raw[i] = int8(c)
	}
	if got := busID(raw); got != "0000:b3:00.0" {
		t.Errorf("busID = %q", got)
	}
}
