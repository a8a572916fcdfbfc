package sizing

import (
	"math"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/jobmeta"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestMemoryModel checks each part of the memory model against the
// formulas of the ZeRO, LoRA, QLoRA and Korthikanti et al. papers,
// evaluated by hand (the expressions below), never by the code under test.
func TestMemoryModel(t *testing.T) {
	// Llama 2 7B's shape: 32 layers, hidden 4096, vocabulary 32000; seq 2048, batch 1.
	act7 := 2.0*2048*4096*32 + 34.0*2048*4096 + 4.0*2048*32000
	// LLaMA 65B: 80 layers, hidden 8192, vocabulary 32000; seq 512, batch 1.
	act65 := 2.0*512*8192*80 + 34.0*512*8192 + 4.0*512*32000
	cases := []struct {
		name                        string
		meta                        string
		gpus                        int
		sh                          jobmeta.Sharding
		weights, grads, optim, acts float64
		kv                          float64
	}{
		{"7B full bf16, one GPU (16 B/param, ZeRO §3.1)", "params=7B workload=finetune", 1, jobmeta.ShardingReplicated, 2 * 7e9, 2 * 7e9, 12 * 7e9, act7, 0},
		{"7B full over 16 GPUs, zero3", "params=7B workload=finetune", 16, jobmeta.ShardingZeRO3, 2 * 7e9 / 16, 2 * 7e9 / 16, 12 * 7e9 / 16, act7, 0},
		{"7B full over 8 GPUs, zero2", "params=7B workload=train", 8, jobmeta.ShardingZeRO2, 2 * 7e9, 2 * 7e9 / 8, 12 * 7e9 / 8, act7, 0},
		{"7B full over 4 GPUs, zero1", "params=7B workload=train", 4, jobmeta.ShardingZeRO1, 2 * 7e9, 2 * 7e9, 12 * 7e9 / 4, act7, 0},
		{"7B full fp32 (4+4+8)", "params=7B workload=train precision=fp32", 1, jobmeta.ShardingReplicated, 4 * 7e9, 4 * 7e9, 8 * 7e9, act7, 0},
		{"7B LoRA bf16: frozen 2 B + 1% adapters at 16 B", "params=7B workload=lora", 2, jobmeta.ShardingReplicated, 2*7e9 + 4*0.01*7e9, 4 * 0.01 * 7e9, 8 * 0.01 * 7e9, act7, 0},
		{"65B QLoRA seq 512: 4.127-bit weights", "params=65B workload=qlora seq=512", 1, jobmeta.ShardingReplicated, 0.516*65e9 + 4*0.01*65e9, 4 * 0.01 * 65e9, 8 * 0.01 * 65e9, act65, 0},
		{"65B QLoRA under FSDP over 2 GPUs", "params=65B method=qlora workload=finetune seq=512", 2, jobmeta.ShardingZeRO3, (0.516*65e9 + 4*0.01*65e9) / 2, 4 * 0.01 * 65e9 / 2, 8 * 0.01 * 65e9 / 2, act65, 0},
		// Llama 3.1 70B: 80 layers, 8 KV heads of 128; context 4096, batch 1, fp16 KV.
		{"70B inference bf16 over 8 GPUs", "params=70B workload=inference", 8, "", 2 * 70e9 / 8, 0, 0, 0, 2.0 * 80 * 8 * 128 * 4096 * 1 * 2 / 8},
		{"70B inference, 32K context, batch 8", "params=70B workload=inference context=32K batch=8", 4, "", 2 * 70e9 / 4, 0, 0, 0, 2.0 * 80 * 8 * 128 * 32768 * 8 * 2 / 4},
		// Llama 3.1 405B: 126 layers, 8 KV heads of 128; fp8 weights and KV.
		{"405B inference fp8 over 8 GPUs", "params=405B workload=inference precision=fp8", 8, "", 405e9 / 8, 0, 0, 0, 2.0 * 126 * 8 * 128 * 4096 * 1 * 1 / 8},
		{"13B inference int4, given shape", "params=13B workload=inference precision=int4 layers=40 hidden=5120 heads=40 kv_heads=40 context=2K", 1, "", 0.5 * 13e9, 0, 0, 0, 2.0 * 40 * 40 * 128 * 2048 * 1 * 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			md := md(t, "burst: "+c.meta)
			n := newTestPolicy(t).needOf(Request{Metadata: md})
			m := n.model.MemoryOn(c.gpus, c.sh)
			got := []float64{m.Weights, m.Gradients, m.Optimizer, m.Activations, m.KVCache}
			want := []float64{c.weights, c.grads, c.optim, c.acts, c.kv}
			for i, name := range []string{"weights", "gradients", "optimizer", "activations", "kv cache"} {
				if !near(got[i], want[i]) {
					t.Errorf("%s = %.6g, want %.6g", name, got[i], want[i])
				}
			}
			if !near(m.PerGPU(), c.weights+c.grads+c.optim+c.acts+c.kv) {
				t.Errorf("per GPU %.6g", m.PerGPU())
			}
		})
	}
}

func TestArchFor(t *testing.T) {
	cases := []struct {
		meta                string
		name                string
		layers, hidden, kvh int
		noteWanted          bool
	}{
		{"params=7B", "Llama 2 7B", 32, 4096, 32, true},
		{"params=8B", "Llama 3.1 8B", 32, 4096, 8, true},
		{"params=10B", "Llama 3.1 8B", 32, 4096, 8, true},  // ln(10/8.03)=0.22 < ln(13/10)=0.26
		{"params=70B", "Llama 3.1 70B", 80, 8192, 8, true}, // nearer 70.6 than 65.2
		{"params=300M", "GPT-2 (124M)", 12, 768, 12, true}, // ln(300/124)=0.88 < ln(1240/300)=1.42
		{"params=1T", "Llama 3.1 405B", 126, 16384, 8, true},
		{"params=7B layers=48 hidden=5120 heads=40 kv_heads=8", "as given", 48, 5120, 8, false},
		{"params=7B heads=16", "Llama 2 7B", 32, 4096, 16, true}, // heads= without kv_heads=: no grouped-query attention
	}
	for _, c := range cases {
		a, note := ArchFor(md(t, "burst: "+c.meta))
		if !strings.Contains(note, c.name) && a.Name != c.name || a.Layers != c.layers || a.Hidden != c.hidden || a.KVHeads != c.kvh || (note != "") != c.noteWanted {
			t.Errorf("%s: got %+v note %q; want %s %d/%d/%d", c.meta, a, note, c.name, c.layers, c.hidden, c.kvh)
		}
	}
}

func TestComputeHoursAndFLOPs(t *testing.T) {
	cases := []struct {
		w    jobmeta.Workload
		m    jobmeta.Method
		want float64
	}{
		{jobmeta.WorkloadTrain, jobmeta.MethodFull, 6},
		{jobmeta.WorkloadFinetune, jobmeta.MethodFull, 6},
		{jobmeta.WorkloadFinetune, jobmeta.MethodLoRA, 4},
		{jobmeta.WorkloadFinetune, jobmeta.MethodQLoRA, 4},
		{jobmeta.WorkloadInference, "", 2},
	}
	for _, c := range cases {
		if got := FLOPsPerParamToken(c.w, c.m); got != c.want {
			t.Errorf("%s/%s: %v want %v", c.w, c.m, got, c.want)
		}
	}
	// Llama 2 7B: 6 x 7e9 x 2e12 FLOPs on one A100 at the MFU of mfu.go
	// for 7B: m_A100 / (1 + (P0 x 312/989 / 7e9)^beta).
	mfu7 := 0.4560 / (1 + math.Pow(3.39e8*312/989/7e9, 0.4708))
	if got, want := ComputeHours(6*7e9*2e12, "a100", 7e9, 1, 1), 6*7e9*2e12/(312e12*mfu7)/3600; !near(got, want) {
		t.Errorf("a100: %v want %v", got, want)
	}
	// 16 H100 at 0.925 scaling efficiency, 70B.
	mfu70 := 0.3195 / (1 + math.Pow(3.39e8/70e9, 0.4708))
	if got, want := ComputeHours(1e21, "h100", 70e9, 16, 0.925), 1e21/(16*989e12*mfu70*0.925)/3600; !near(got, want) {
		t.Errorf("h100: %v want %v", got, want)
	}
	// a larger model reaches a higher MFU; the faster GPU a lower one
	if a, h := PerfOf("a100"), PerfOf("h100"); !(a.MFUAt(1e9) < a.MFUAt(70e9) && h.MFUAt(8e9) < a.MFUAt(8e9)) {
		t.Errorf("MFU: A100 1B %v 70B %v, H100 8B %v", a.MFUAt(1e9), a.MFUAt(70e9), h.MFUAt(8e9))
	}
	if ComputeHours(1e21, "h100", 70e9, 0, 1) != 0 || ComputeHours(0, "h100", 70e9, 8, 1) != 0 {
		t.Error("no GPUs or no FLOPs must give 0")
	}
}

func TestEfficiency(t *testing.T) {
	p5, g5x4, g6 := testFabric(t, "p5.48xlarge", true), testFabric(t, "g5.12xlarge", true), testFabric(t, "g6.xlarge", true)
	cases := []struct {
		name  string
		f     Fabric
		nodes int
		gpn   int
		v     float64
		want  float64
	}{
		{"one GPU", g6, 1, 1, 1, 1},
		{"one NVSwitch node", p5, 1, 8, 1, 1},
		{"p5 x2, DDP", p5, 2, 8, 1, 1 - (1-0.95)*1},
		{"p5 x4, ZeRO-3 (1.5x traffic)", p5, 4, 8, 1.5, 1 - (1-0.95)*1.5},
		{"g6.xlarge x4 over TCP", g6, 4, 1, 1, 0.70},
		{"g5.12xlarge x2: PCIe and EFA 40 Gbps", g5x4, 2, 4, 1, (1 - 0.10) * (1 - 0.15)},
		{"LoRA over TCP: adapters only", g6, 8, 1, 0.01, 1 - 0.30*0.01},
		{"PCIe node alone", g5x4, 1, 4, 1, 0.90},
	}
	for _, c := range cases {
		got, _ := Efficiency(c.f, c.nodes, c.gpn, c.v)
		if !near(got, c.want) {
			t.Errorf("%s: %v want %v", c.name, got, c.want)
		}
	}
	if !p5.NVLink || !p5.EFA || g6.EFA || g6.NVLink || !g5x4.EFA {
		t.Errorf("fabrics: p5 %+v g6 %+v g5.12xlarge %+v", p5, g6, g5x4)
	}
}

func TestCommVolume(t *testing.T) {
	full := Model{Workload: jobmeta.WorkloadTrain, Method: jobmeta.MethodFull}
	lora := Model{Workload: jobmeta.WorkloadFinetune, Method: jobmeta.MethodLoRA}
	qlora := Model{Workload: jobmeta.WorkloadFinetune, Method: jobmeta.MethodQLoRA}
	inf := Model{Workload: jobmeta.WorkloadInference}
	cases := []struct {
		m    Model
		sh   jobmeta.Sharding
		want float64
	}{
		{full, jobmeta.ShardingReplicated, 1}, {full, jobmeta.ShardingZeRO2, 1}, {full, jobmeta.ShardingZeRO3, 1.5},
		{lora, jobmeta.ShardingReplicated, 0.01}, {lora, jobmeta.ShardingZeRO3, 0.01 + 2.0/2}, {qlora, jobmeta.ShardingZeRO3, 0.01 + 0.516/2},
		{inf, "", 0},
	}
	for _, c := range cases {
		if got := c.m.CommVolume(c.sh); !near(got, c.want) {
			t.Errorf("%s/%s %s: %v want %v", c.m.Workload, c.m.Method, c.sh, got, c.want)
		}
	}
}

// TestDecode checks the bandwidth-bound decode model by hand.
func TestDecode(t *testing.T) {
	m70 := newTestPolicy(t).needOf(Request{Metadata: md(t, "burst: params=70B workload=inference")}).model
	d, ok := DecodeOn(*m70, "h100", 81920, 1, 8)
	bytes := 2*70e9 + 2.0*80*8*128*4096*1*2
	wantLat := bytes / (8 * 3350e9 * 0.5)
	if !ok || !near(d.TokenLatencySec, wantLat) || !near(d.TokensPerSec, 1/wantLat) || d.Bound != "memory" {
		t.Errorf("70B on 8 x H100: %+v, want %.6f s/token", d, wantLat)
	}
	// Two pipelined nodes: the same latency, twice the tokens.
	d2, _ := DecodeOn(*m70, "h100", 81920, 2, 8)
	if !near(d2.TokenLatencySec, wantLat) || !near(d2.TokensPerSec, 2/wantLat) {
		t.Errorf("2 nodes: %+v", d2)
	}
	// Batch 512 of an 8B model on one A100-80GB: 2 x 8e9 x 512 FLOPs per step
	// against (16 GB + 512 x 0.54 GB of KV) / 2,039 GB/s x 0.5.
	m8 := newTestPolicy(t).needOf(Request{Metadata: md(t, "burst: params=8B workload=inference batch=512 context=1K")}).model
	d3, _ := DecodeOn(*m8, "a100", 81920, 1, 1)
	mem := (2*8e9 + 2.0*32*8*128*1024*512*2) / (2039e9 * 0.5)
	comp := 2 * 8e9 * 512 / (312e12 * 0.40)
	if want := math.Max(mem, comp); !near(d3.TokenLatencySec, want) {
		t.Errorf("8B batch 512: %+v want %.6f (mem %.6f comp %.6f)", d3, want, mem, comp)
	}
	if _, ok := DecodeOn(*m8, "gaudi", 1, 1, 1); ok {
		t.Error("unknown GPU has no bandwidth")
	}
	if b, _ := BandwidthOf("a100", 40960); b.GBps != 1555 {
		t.Errorf("A100 40GB: %v", b)
	}
}

// TestEveryGPUModelHasBandwidth: each NVIDIA model of the catalog has a
// memory bandwidth for the decode model.
func TestEveryGPUModelHasBandwidth(t *testing.T) {
	for m := range gpuPerf {
		if _, ok := BandwidthOf(m, 0); !ok {
			t.Errorf("GPU model %s has no bandwidth", m)
		}
	}
}

func TestEfficiencyAgreesWithItsAccount(t *testing.T) {
	for _, f := range []Fabric{testFabric(t, "p5.48xlarge", true), testFabric(t, "g5.12xlarge", true), testFabric(t, "g6.xlarge", true), testFabric(t, "p5.48xlarge", false)} {
		for _, nodes := range []int{1, 2, 7} {
			for _, gpn := range []int{1, 4} {
				for _, v := range []float64{0.01, 1, 1.5} {
					e, _ := Efficiency(f, nodes, gpn, v)
					if e2 := efficiency(f, nodes, gpn, v); !near(e, e2) {
						t.Errorf("%+v %d x %d v=%v: %v vs %v", f, nodes, gpn, v, e, e2)
					}
				}
			}
		}
	}
}

// testFabric is the fabric of a catalog type, with or without EFA attached.
func testFabric(t *testing.T, name string, efa bool) Fabric {
	t.Helper()
	cat := catalog.Default()
	it, ok := cat.Lookup(name)
	net, nok := cat.NetworkOf(name)
	if !ok || !nok {
		t.Fatalf("%s is not in the catalog", name)
	}
	return fabricOf(it, net, efa)
}

// TestFabricEFAOnlyWhenAttached: a p5.48xlarge with its 32 EFA interfaces
// is EFA at 3,200 Gbps (AWS's figure); without them, TCP over the primary
// interface's one card of 100 Gbps. A type without EFA is TCP either way.
func TestFabricEFAOnlyWhenAttached(t *testing.T) {
	if f := testFabric(t, "p5.48xlarge", true); !f.EFA || f.Gbps != 3200 {
		t.Errorf("p5.48xlarge with EFA attached: %+v, want EFA at 3200 Gbps", f)
	}
	if f := testFabric(t, "p5.48xlarge", false); f.EFA || f.Gbps != 100 {
		t.Errorf("p5.48xlarge without EFA: %+v, want TCP at 100 Gbps (one of 32 cards)", f)
	}
	if f := testFabric(t, "g6.xlarge", true); f.EFA || f.Mbps != 2500 {
		t.Errorf("g6.xlarge: %+v, want TCP at 2500 Mbps (no EFA on the type)", f)
	}
}
