// Package sim is a simulated gpu.Reader for demos, tests and benchmarks on
// machines without GPUs. Readings are deterministic: the same seed, GPU,
// assigned job and tick always give the same values.
package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"sync"
	"time"

	"github.com/burst-hpc/burst/agent/gpu"
)

// Options configure a simulated node.
type Options struct {
	GPUs             int    // number of GPUs; default 8
	Seed             uint64 // varies every curve
	Name             string // default "Simulated NVIDIA H100 80GB HBM3"
	MemoryTotalBytes uint64 // per GPU; default 80 GiB
	// MemoryUsedPercent fixes the memory a job uses, in % of each GPU;
	// 0: 30% plus half the utilisation.
	MemoryUsedPercent int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// FaultFile, if set, is read for injected faults on every Health call
	// (see Fault and ReadFaultFile: root-owned files only).
	FaultFile string
	// InstanceID is this instance's (faults for another are not applied).
	InstanceID string
}

// Reader simulates Options.GPUs GPUs. Assign puts a job's processes on a GPU.
type Reader struct {
	opts Options
	mu   sync.Mutex
	jobs []assignment // per GPU
	tick uint64
	// health is the injected fault state (health.go)
	health health
}

type assignment struct {
	key  string
	pids []int
	from uint64 // tick at which the job arrived
}

// New returns a simulated Reader.
func New(o Options) (*Reader, error) {
	if o.GPUs == 0 {
		o.GPUs = 8
	}
	if o.GPUs < 0 || o.GPUs > 64 {
		return nil, fmt.Errorf("creating simulated GPUs: count %d out of range 1..64", o.GPUs)
	}
	if o.Name == "" {
		o.Name = "Simulated NVIDIA H100 80GB HBM3"
	}
	if o.MemoryTotalBytes == 0 {
		o.MemoryTotalBytes = 80 << 30
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Reader{opts: o, jobs: make([]assignment, o.GPUs), health: newHealth(o.GPUs)}, nil
}

// Assign runs the job identified by key with processes pids on GPU index;
// an empty key leaves the GPU idle. The utilisation curve depends only on
// the seed, the GPU index, key and ticks since assignment.
func (r *Reader) Assign(index int, key string, pids ...int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if index < 0 || index >= len(r.jobs) {
		return fmt.Errorf("assigning job %q: GPU %d out of range 0..%d", key, index, len(r.jobs)-1)
	}
	r.jobs[index] = assignment{key: key, pids: append([]int(nil), pids...), from: r.tick}
	return nil
}

func (r *Reader) uuid(i int) string {
	return fmt.Sprintf("GPU-5e1a0000-0000-4000-8000-%04x%08x", r.opts.Seed&0xffff, i)
}

// Devices lists the simulated GPUs.
func (r *Reader) Devices() ([]gpu.Device, error) {
	if err := r.loadFaults(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	n := r.health.visible
	r.mu.Unlock()
	out := make([]gpu.Device, n)
	for i := range out {
		out[i] = gpu.Device{Index: i, UUID: r.uuid(i), Name: r.opts.Name, MemoryTotalBytes: r.opts.MemoryTotalBytes}
	}
	return out, nil
}

// Sample returns one reading per GPU and advances the simulation one tick.
func (r *Reader) Sample(ctx context.Context) ([]gpu.Sample, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Now()
	out := make([]gpu.Sample, r.health.visible)
	for i := range out {
		a := r.jobs[i]
		s := gpu.Sample{Time: now, Index: i, UUID: r.uuid(i), Name: r.opts.Name, MemoryTotalBytes: r.opts.MemoryTotalBytes,
			PowerWatts: 70, TemperatureC: 32}
		if a.key != "" {
			u := Curve(r.opts.Seed, i, a.key, r.tick-a.from)
			s.UtilPercent = u
			s.MemoryUsedBytes = r.opts.MemoryTotalBytes / 100 * uint64(30+u/2)
			if p := r.opts.MemoryUsedPercent; p > 0 {
				s.MemoryUsedBytes = r.opts.MemoryTotalBytes / 100 * uint64(p)
			}
			s.PowerWatts = 70 + 6.3*float64(u)
			s.TemperatureC = 32 + u*4/10
			s.PIDs = append([]int(nil), a.pids...)
		}
		out[i] = s
	}
	r.tick++
	return out, nil
}

// Close does nothing.
func (r *Reader) Close() error { return nil }

// Curve is the utilisation (0..100) of GPU index running job key, tick ticks
// after the job arrived: a per-job plateau with a slow wave, periodic dips
// (a data-loader stall every ~60 ticks, a checkpoint every ~300) and
// deterministic noise.
func Curve(seed uint64, index int, key string, tick uint64) uint32 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s", seed, index, key)
	k := h.Sum64()
	plateau := 35 + float64(k%60)         // 35..94
	period := 120 + float64((k>>8)%240)   // wave period in ticks
	phase := float64((k>>16)%1000) / 1000 // 0..1
	v := plateau + 8*math.Sin(2*math.Pi*(float64(tick)/period+phase))
	if tick < 5 { // warm-up
		v *= float64(tick) / 5
	}
	if tick%uint64(60+(k>>24)%30) == 0 && tick > 0 {
		v *= 0.2
	}
	if tick%300 >= 295 {
		v = 0
	}
	n := splitmix(k ^ tick)
	v += float64(n%7) - 3
	return uint32(math.Max(0, math.Min(100, math.Round(v))))
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
