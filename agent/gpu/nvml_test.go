//go:build cgo

package gpu

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

func setFuncs(t *testing.T, devs []nvml.Device, util func(i int) (nvml.Utilization, nvml.Return)) {
	t.Helper()
	for i, d := range devs {
		i := i
		sd, ok := d.(*server.Device)
		if !ok {
			t.Fatalf("unexpected mock device type %T", d)
		}
		md := &sd.Device
		md.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return util(i) }
		md.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(100000 + 1000*i), nvml.SUCCESS }
		md.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if s != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return uint32(40 + i), nvml.SUCCESS
		}
		md.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			if i%2 == 1 {
				return nil, nvml.SUCCESS
			}
			return []nvml.ProcessInfo{{Pid: uint32(1000 + i), UsedGpuMemory: 1 << 30}}, nvml.SUCCESS
		}
	}
}

func TestNVMLSamplesMockServers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		srv      func() ([]nvml.Device, nvml.Interface)
		wantName string
	}{
		{"dgxa100", func() ([]nvml.Device, nvml.Interface) { s := dgxa100.New(); return s.Devices, s }, "A100"},
		{"dgxh100", func() ([]nvml.Device, nvml.Interface) { s := dgxh100.New(); return s.Devices, s }, "H100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs, lib := tc.srv()
			setFuncs(t, devs, func(i int) (nvml.Utilization, nvml.Return) {
				return nvml.Utilization{Gpu: uint32(10 * i), Memory: 5}, nvml.SUCCESS
			})
			r, err := NewNVML(lib)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			info, err := r.Devices()
			if err != nil {
				t.Fatal(err)
			}
			if len(info) != 8 {
				t.Fatalf("got %d devices, want 8", len(info))
			}
			seen := map[string]bool{}
			for i, d := range info {
				if d.Index != i || d.UUID == "" || d.MemoryTotalBytes == 0 || !strings.Contains(d.Name, tc.wantName) {
					t.Errorf("device %d = %+v, want index %d, a UUID, memory and a name containing %q", i, d, i, tc.wantName)
				}
				if seen[d.UUID] {
					t.Errorf("duplicate UUID %s", d.UUID)
				}
				seen[d.UUID] = true
			}
			samples, err := r.Sample(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(samples) != 8 {
				t.Fatalf("got %d samples, want 8", len(samples))
			}
			for i, s := range samples {
				if s.UUID != info[i].UUID || s.Index != i {
					t.Errorf("sample %d is for %d/%s, want %s", i, s.Index, s.UUID, info[i].UUID)
				}
				if s.UtilPercent != uint32(10*i) {
					t.Errorf("GPU %d util = %d, want %d", i, s.UtilPercent, 10*i)
				}
				if s.PowerWatts != float64(100+i) {
					t.Errorf("GPU %d power = %v W, want %d", i, s.PowerWatts, 100+i)
				}
				if s.TemperatureC != uint32(40+i) {
					t.Errorf("GPU %d temperature = %d, want %d", i, s.TemperatureC, 40+i)
				}
				if s.MemoryTotalBytes != info[i].MemoryTotalBytes {
					t.Errorf("GPU %d memory total = %d, want %d", i, s.MemoryTotalBytes, info[i].MemoryTotalBytes)
				}
				wantPIDs := 0
				if i%2 == 0 {
					wantPIDs = 1
				}
				if len(s.PIDs) != wantPIDs || (wantPIDs == 1 && s.PIDs[0] != 1000+i) {
					t.Errorf("GPU %d PIDs = %v, want %d pid(s) 1000+%d", i, s.PIDs, wantPIDs, i)
				}
			}
		})
	}
}

func TestNVMLErrors(t *testing.T) {
	t.Run("library missing wraps ErrNoDriver", func(t *testing.T) {
		lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
		_, err := NewNVML(lib)
		if !errors.Is(err, ErrNoDriver) {
			t.Fatalf("err = %v, want ErrNoDriver", err)
		}
		if !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") {
			t.Errorf("error %q does not name the NVML code", err)
		}
	})
	t.Run("lost GPU is a named error, not ErrNoDriver", func(t *testing.T) {
		s := dgxh100.New()
		setFuncs(t, s.Devices, func(i int) (nvml.Utilization, nvml.Return) {
			if i == 3 {
				return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
			}
			return nvml.Utilization{Gpu: 1}, nvml.SUCCESS
		})
		r, err := NewNVML(s)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		_, err = r.Sample(context.Background())
		var ne *Error
		if !errors.As(err, &ne) || ne.Return != nvml.ERROR_GPU_IS_LOST || errors.Is(err, ErrNoDriver) {
			t.Fatalf("err = %v, want *Error ERROR_GPU_IS_LOST", err)
		}
		if !strings.Contains(err.Error(), "GPU 3") || !strings.Contains(err.Error(), "ERROR_GPU_IS_LOST") {
			t.Errorf("error %q should name GPU 3 and the code", err)
		}
	})
	t.Run("unsupported power and temperature read as zero", func(t *testing.T) {
		s := dgxa100.New()
		setFuncs(t, s.Devices, func(i int) (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 50}, nvml.SUCCESS })
		for _, d := range s.Devices {
			md := &d.(*server.Device).Device
			md.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
			md.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}
		r, err := NewNVML(s)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		got, err := r.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range got {
			if g.PowerWatts != 0 || g.TemperatureC != 0 || g.UtilPercent != 50 {
				t.Errorf("GPU %d = %+v, want zero power/temperature and util 50", g.Index, g)
			}
		}
	})
}
