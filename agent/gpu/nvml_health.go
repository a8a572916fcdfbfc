//go:build cgo

package gpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/burst-hpc/burst/internal/gpuhealth"
)

// The clock event reasons that mean the hardware slows itself down (heat,
// the power brake, an external slowdown signal). Software power capping
// and idle clocks are normal operation and not counted.
const slowdownReasons = nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwThermalSlowdown |
	nvml.ClocksThrottleReasonHwPowerBrakeSlowdown | nvml.ClocksEventReasonSwThermalSlowdown

// healthEvents are the event types registered per device.
const healthEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError

// RegisterHealthEvents creates the event set and registers every GPU on it
// for critical Xid and double-bit ECC events (those the GPU supports). It
// returns how many GPUs were registered; Health calls it when not done.
func (n *NVML) RegisterHealthEvents() (int, error) {
	if n.events != nil {
		return n.registered, nil
	}
	set, r := n.lib.EventSetCreate()
	if r != nvml.SUCCESS {
		return 0, fmt.Errorf("creating the NVML event set: %w", nvErr("EventSetCreate", r))
	}
	count := 0
	for i, d := range n.devices {
		want := uint64(healthEvents)
		if sup, r := d.GetSupportedEventTypes(); r == nvml.SUCCESS {
			want &= sup
		} else if r != nvml.ERROR_NOT_SUPPORTED {
			set.Free()
			return 0, fmt.Errorf("reading the event types of GPU %d (%s): %w", i, n.info[i].UUID, nvErr("GetSupportedEventTypes", r))
		}
		if want == 0 {
			continue
		}
		if r := d.RegisterEvents(want, set); r != nvml.SUCCESS && r != nvml.ERROR_NOT_SUPPORTED {
			set.Free()
			return 0, fmt.Errorf("registering health events of GPU %d (%s): %w", i, n.info[i].UUID, nvErr("RegisterEvents", r))
		} else if r == nvml.SUCCESS {
			count++
		}
	}
	n.events, n.registered = set, count
	return count, nil
}

// Health implements HealthReader over NVML.
func (n *NVML) Health(ctx context.Context, wait time.Duration) ([]gpuhealth.Event, error) {
	if _, err := n.RegisterHealthEvents(); err != nil {
		return nil, err
	}
	now := n.now()
	var out []gpuhealth.Event
	evs, err := n.waitEvents(ctx, wait)
	if err != nil {
		return nil, err
	}
	out = append(out, evs...)
	for i, d := range n.devices {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, n.deviceHealth(i, d, now)...)
	}
	return out, nil
}

// waitEvents drains the event set: the first wait is up to wait, later
// ones do not block.
func (n *NVML) waitEvents(ctx context.Context, wait time.Duration) ([]gpuhealth.Event, error) {
	var out []gpuhealth.Event
	ms := uint32(wait / time.Millisecond)
	for k := 0; k < 64 && ctx.Err() == nil; k++ {
		ed, r := n.events.Wait(ms)
		ms = 0
		switch r {
		case nvml.SUCCESS:
		case nvml.ERROR_TIMEOUT:
			return out, nil
		case nvml.ERROR_GPU_IS_LOST:
			// the device that raised it is unknown here; the per-GPU
			// reads below find it
			return out, nil
		default:
			return out, fmt.Errorf("waiting for GPU events: %w", nvErr("EventSet.Wait", r))
		}
		i := n.indexOf(ed.Device)
		e := n.event(i, n.now())
		switch {
		case ed.EventType&nvml.EventTypeXidCriticalError != 0:
			e.Kind, e.Xid = gpuhealth.KindXid, ed.EventData
		case ed.EventType&nvml.EventTypeDoubleBitEccError != 0:
			e.Kind, e.Count = gpuhealth.KindECCVolatile, 1
		default:
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

func (n *NVML) indexOf(d nvml.Device) int {
	for i, x := range n.devices {
		if x == d {
			return i
		}
	}
	if d != nil {
		if u, r := d.GetUUID(); r == nvml.SUCCESS {
			for i, info := range n.info {
				if info.UUID == u {
					return i
				}
			}
		}
	}
	return -1
}

func (n *NVML) event(i int, now time.Time) gpuhealth.Event {
	e := gpuhealth.Event{Time: now, GPU: i}
	if i >= 0 {
		e.UUID, e.BusID = n.info[i].UUID, n.busIDs[i]
	}
	return e
}

// deviceHealth reads one GPU's counters. Counters a board does not have
// (ERROR_NOT_SUPPORTED) are skipped; ERROR_GPU_IS_LOST from any read is
// the GPU lost, and nothing more is read from it.
func (n *NVML) deviceHealth(i int, d nvml.Device, now time.Time) []gpuhealth.Event {
	var out []gpuhealth.Event
	add := func(k gpuhealth.Kind, count uint64, detail string) {
		e := n.event(i, now)
		e.Kind, e.Count, e.Detail = k, count, detail
		out = append(out, e)
	}
	lost := func(r nvml.Return, op string) bool {
		if r == nvml.ERROR_GPU_IS_LOST {
			add(gpuhealth.KindLost, 0, op+": "+nvml.ErrorString(r))
			return true
		}
		return false
	}
	if _, r := d.GetUUID(); lost(r, "GetUUID") {
		return out
	}
	for _, c := range []struct {
		counter nvml.EccCounterType
		kind    gpuhealth.Kind
	}{{nvml.VOLATILE_ECC, gpuhealth.KindECCVolatile}, {nvml.AGGREGATE_ECC, gpuhealth.KindECCAggregate}} {
		v, r := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, c.counter)
		if lost(r, "GetTotalEccErrors") {
			return out
		}
		if r == nvml.SUCCESS && v > 0 {
			add(c.kind, v, "")
		}
	}
	st, r := d.GetRetiredPagesPendingStatus()
	if lost(r, "GetRetiredPagesPendingStatus") {
		return out
	}
	if r == nvml.SUCCESS && st == nvml.FEATURE_ENABLED {
		add(gpuhealth.KindRetiredPagesPending, 0, "")
	}
	corr, unc, pending, failed, r := d.GetRemappedRows()
	if lost(r, "GetRemappedRows") {
		return out
	}
	if r == nvml.SUCCESS {
		detail := fmt.Sprintf("%d correctable and %d uncorrectable rows remapped", corr, unc)
		if failed {
			add(gpuhealth.KindRowRemapFailed, uint64(unc), detail)
		} else if pending {
			add(gpuhealth.KindRowRemapPending, uint64(unc), detail)
		}
	}
	var nvlink uint64
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		on, r := d.GetNvLinkState(l)
		if lost(r, "GetNvLinkState") {
			return out
		}
		if r != nvml.SUCCESS || on != nvml.FEATURE_ENABLED {
			continue
		}
		for _, c := range []nvml.NvLinkErrorCounter{nvml.NVLINK_ERROR_DL_REPLAY, nvml.NVLINK_ERROR_DL_RECOVERY, nvml.NVLINK_ERROR_DL_CRC_FLIT, nvml.NVLINK_ERROR_DL_CRC_DATA, nvml.NVLINK_ERROR_DL_ECC_DATA} {
			if v, r := d.GetNvLinkErrorCounter(l, c); r == nvml.SUCCESS {
				nvlink += v
			}
		}
	}
	if nvlink > 0 {
		// a total: the monitor acts on its growth
		add(gpuhealth.KindNVLink, nvlink, "")
	}
	reasons, r := d.GetCurrentClocksEventReasons()
	if r == nvml.ERROR_FUNCTION_NOT_FOUND {
		reasons, r = d.GetCurrentClocksThrottleReasons() // older drivers
	}
	if lost(r, "GetCurrentClocksEventReasons") {
		return out
	}
	if r == nvml.SUCCESS && reasons&slowdownReasons != 0 {
		// an observation: the monitor decides when it is sustained
		add(gpuhealth.KindSlowdown, reasons&slowdownReasons, slowdownNames(reasons))
	}
	return out
}

func slowdownNames(reasons uint64) string {
	var names []string
	for _, r := range []struct {
		bit  uint64
		name string
	}{{nvml.ClocksThrottleReasonHwSlowdown, "hw_slowdown"}, {nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_thermal"},
		{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake"}, {nvml.ClocksEventReasonSwThermalSlowdown, "sw_thermal"}} {
		if reasons&r.bit != 0 {
			names = append(names, r.name)
		}
	}
	return strings.Join(names, ",")
}

// freeEvents frees the event set (Close).
func (n *NVML) freeEvents() error {
	if n.events == nil {
		return nil
	}
	r := n.events.Free()
	n.events = nil
	if r != nvml.SUCCESS && !errors.Is(nvErr("EventSet.Free", r), ErrNoDriver) {
		return fmt.Errorf("freeing the NVML event set: %w", nvErr("EventSet.Free", r))
	}
	return nil
}
