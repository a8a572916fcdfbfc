//go:build cgo

package gpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Error is an NVML call that failed. Return carries NVML's code; its name
// (e.g. ERROR_GPU_IS_LOST) is in the message.
type Error struct {
	Op     string
	Return nvml.Return
}

func (e *Error) Error() string {
	return fmt.Sprintf("nvml %s: %s", e.Op, nvml.ErrorString(e.Return))
}

// Is makes errors.Is(err, ErrNoDriver) true for the codes that mean NVML is
// unusable on this machine.
func (e *Error) Is(target error) bool {
	if target != ErrNoDriver {
		return false
	}
	switch e.Return {
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return true
	}
	return false
}

func nvErr(op string, r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return &Error{Op: op, Return: r}
}

// NVML is a Reader over an nvml.Interface (the real library or go-nvml's mocks).
type NVML struct {
	lib     nvml.Interface
	devices []nvml.Device
	info    []Device
	busIDs  []string
	now     func() time.Time
	// events is the health event set (nvml_health.go), created on first use.
	events     nvml.EventSet
	registered int
}

// Open loads libnvidia-ml through go-nvml and returns a Reader over every
// GPU. When the library or driver is missing the error wraps ErrNoDriver.
func Open() (*NVML, error) {
	return NewNVML(nvml.New())
}

// NewNVML initialises lib and enumerates its devices. The returned reader
// owns lib and shuts it down on Close.
func NewNVML(lib nvml.Interface) (*NVML, error) {
	if r := lib.Init(); r != nvml.SUCCESS {
		return nil, fmt.Errorf("initialising NVML (is the NVIDIA driver installed and loaded?): %w", nvErr("Init", r))
	}
	n := &NVML{lib: lib, now: time.Now}
	count, r := lib.DeviceGetCount()
	if r != nvml.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("counting GPUs: %w", nvErr("DeviceGetCount", r))
	}
	for i := 0; i < count; i++ {
		d, r := lib.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			lib.Shutdown()
			return nil, fmt.Errorf("getting handle of GPU %d: %w", i, nvErr("DeviceGetHandleByIndex", r))
		}
		info := Device{Index: i}
		var err error
		if info.UUID, r = d.GetUUID(); r != nvml.SUCCESS {
			err = nvErr("GetUUID", r)
		} else if info.Name, r = d.GetName(); r != nvml.SUCCESS {
			err = nvErr("GetName", r)
		} else if mem, r := d.GetMemoryInfo(); r != nvml.SUCCESS {
			err = nvErr("GetMemoryInfo", r)
		} else {
			info.MemoryTotalBytes = mem.Total
		}
		if err != nil {
			lib.Shutdown()
			return nil, fmt.Errorf("describing GPU %d: %w", i, err)
		}
		bus := ""
		if p, r := d.GetPciInfo(); r == nvml.SUCCESS {
			bus = busID(p.BusId)
		}
		n.devices = append(n.devices, d)
		n.info = append(n.info, info)
		n.busIDs = append(n.busIDs, bus)
	}
	return n, nil
}

// Devices lists the GPUs found at Open.
func (n *NVML) Devices() ([]Device, error) {
	return append([]Device(nil), n.info...), nil
}

// Sample reads every GPU once. Power and temperature are optional in NVML
// (ERROR_NOT_SUPPORTED on some boards): they are left zero then. A failure
// of a required reading (utilisation, memory, processes) is an error naming
// the GPU.
func (n *NVML) Sample(ctx context.Context) ([]Sample, error) {
	now := n.now()
	out := make([]Sample, 0, len(n.devices))
	for i, d := range n.devices {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info := n.info[i]
		s := Sample{Time: now, Index: info.Index, UUID: info.UUID, Name: info.Name, MemoryTotalBytes: info.MemoryTotalBytes}
		u, r := d.GetUtilizationRates()
		if r != nvml.SUCCESS {
			return nil, fmt.Errorf("reading utilisation of GPU %d (%s): %w", i, info.UUID, nvErr("GetUtilizationRates", r))
		}
		s.UtilPercent = u.Gpu
		mem, r := d.GetMemoryInfo()
		if r != nvml.SUCCESS {
			return nil, fmt.Errorf("reading memory of GPU %d (%s): %w", i, info.UUID, nvErr("GetMemoryInfo", r))
		}
		s.MemoryUsedBytes, s.MemoryTotalBytes = mem.Used, mem.Total
		if mw, r := d.GetPowerUsage(); r == nvml.SUCCESS {
			s.PowerWatts = float64(mw) / 1000
		} else if r != nvml.ERROR_NOT_SUPPORTED {
			return nil, fmt.Errorf("reading power of GPU %d (%s): %w", i, info.UUID, nvErr("GetPowerUsage", r))
		}
		if t, r := d.GetTemperature(nvml.TEMPERATURE_GPU); r == nvml.SUCCESS {
			s.TemperatureC = t
		} else if r != nvml.ERROR_NOT_SUPPORTED {
			return nil, fmt.Errorf("reading temperature of GPU %d (%s): %w", i, info.UUID, nvErr("GetTemperature", r))
		}
		procs, r := d.GetComputeRunningProcesses()
		if r != nvml.SUCCESS && r != nvml.ERROR_NOT_SUPPORTED {
			return nil, fmt.Errorf("listing processes of GPU %d (%s): %w", i, info.UUID, nvErr("GetComputeRunningProcesses", r))
		}
		for _, p := range procs {
			s.PIDs = append(s.PIDs, int(p.Pid))
		}
		out = append(out, s)
	}
	return out, nil
}

// Close shuts NVML down.
func (n *NVML) Close() error {
	if n.lib == nil {
		return nil
	}
	ferr := n.freeEvents()
	r := n.lib.Shutdown()
	n.lib = nil
	if r != nvml.SUCCESS && !errors.Is(nvErr("Shutdown", r), ErrNoDriver) {
		return errors.Join(ferr, fmt.Errorf("shutting NVML down: %w", nvErr("Shutdown", r)))
	}
	return ferr
}

// busID is NVML's PCI bus id in the kernel's form: 0000:b3:00.0 (NVML
// gives 00000000:B3:00.0).
func busID(raw [32]int8) string {
	b := make([]byte, 0, len(raw))
	for _, c := range raw {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	s := strings.ToLower(string(b))
	if len(s) == 16 && strings.HasPrefix(s, "0000") {
		s = s[4:]
	}
	return s
}
