package jobmeta

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
)

func TestParseMetadata(t *testing.T) {
	cases := []struct {
		in      string
		want    Metadata
		errs    []string // substrings, one per expected error, in order
		errCols []int
	}{
		{in: "", want: Metadata{}},
		{in: "just a note for humans", want: Metadata{}},
		{
			in:   "burst: params=7B dataset=2TB deadline=8h workload=finetune precision=bf16 checkpoint=30m",
			want: Metadata{Params: 7e9, DatasetBytes: 2e12, Deadline: 8 * time.Hour, Workload: WorkloadFinetune, Precision: PrecisionBF16, Checkpoint: 30 * time.Minute},
		},
		{
			in:   "run 3 burst:params=1.5T,tokens=300B,epochs=2 deadline=2d12h checkpoint_signal=SIGUSR1 capacity=on-demand",
			want: Metadata{Params: 1.5e12, Tokens: 300e9, Epochs: 2, Deadline: 60 * time.Hour, CheckpointSignal: "USR1", Capacity: capacity.OnDemand},
		},
		{in: "burst: dataset=800GiB params=350M", want: Metadata{DatasetBytes: 800 << 30, Params: 350e6}},
		{in: "burst: dataset=20GB params=125K workload=lora precision=int4", want: Metadata{DatasetBytes: 20e9, Params: 125e3, Workload: WorkloadFinetune, Method: MethodLoRA, Precision: PrecisionInt4}},
		{in: "burst: params=65B workload=qlora seq=512 batch=1", want: Metadata{Params: 65e9, Workload: WorkloadFinetune, Method: MethodQLoRA, Seq: 512, Batch: 1}},
		{in: "burst: params=70B workload=finetune method=full sharding=fsdp seq=4K batch=2", want: Metadata{Params: 70e9, Workload: WorkloadFinetune, Method: MethodFull, Sharding: ShardingZeRO3, Seq: 4096, Batch: 2}},
		{in: "burst: method=lora workload=finetune sharding=ddp", want: Metadata{Workload: WorkloadFinetune, Method: MethodLoRA, Sharding: ShardingReplicated}},
		{in: "burst: workload=inference params=8B context=128K batch=16 latency=40ms throughput=2K", want: Metadata{Workload: WorkloadInference, Params: 8e9, Context: 131072, Batch: 16, Latency: 40 * time.Millisecond, Throughput: 2000}},
		{in: "burst: params=7B layers=32 hidden=4096 heads=32 kv_heads=8 sharding=zero2", want: Metadata{Params: 7e9, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, Sharding: ShardingZeRO2}},
		{in: "burst: method=dora", errs: []string{"method=dora is not known; use full, lora or qlora"}, errCols: []int{8}},
		{in: "burst: seq=0 batch=1.5 context=99999999K", errs: []string{"seq=0 is below the least burst accepts (1)", "batch=1.5 is not a whole number", "context=99999999K is not a sequence length"}},
		{in: "burst: layers=-1 hidden=x heads=20000", errs: []string{"layers=-1", "hidden=x", "heads=20000"}},
		{in: "burst: latency=fast throughput=-3", errs: []string{"latency=fast is not a per-token latency", "throughput=-3 is not a token rate"}},
		{in: "burst: sharding=zero4", errs: []string{"sharding=zero4 is not known"}},
		{in: "burst: workload=qlora method=full", want: Metadata{Workload: WorkloadFinetune, Method: MethodQLoRA}, errs: []string{"method=full contradicts workload=qlora"}, errCols: []int{23}},
		{in: "burst: workload=inference method=lora", want: Metadata{Workload: WorkloadInference, Method: MethodLoRA}, errs: []string{"method= applies to finetune and train"}, errCols: []int{27}},
		{in: "burst: workload=train latency=50ms", want: Metadata{Workload: WorkloadTrain, Latency: 50 * time.Millisecond}, errs: []string{"latency= is an inference setting"}, errCols: []int{23}},
		{in: "burst: heads=8 kv_heads=16", want: Metadata{Heads: 8, KVHeads: 16}, errs: []string{"kv_heads=16 is more than heads=8"}, errCols: []int{16}},
		{in: "burst: checkpoint=none workload=inference", want: Metadata{NoCheckpoint: true, Workload: WorkloadInference}},
		{in: "burst: workload=sft precision=bfloat16 capacity=spot", want: Metadata{Workload: WorkloadFinetune, Precision: PrecisionBF16, Capacity: capacity.Spot}},
		{
			in:      "burst: params=7X",
			errs:    []string{"params=7X is not a parameter count; use a number with optional K, M, B or T"},
			errCols: []int{8},
		},
		{
			in:      "burst: parms=7B deadline=soon",
			errs:    []string{`unknown key "parms"`, "deadline=soon is not a duration"},
			errCols: []int{8, 17},
		},
		{in: "burst: params=7B params=8B", want: Metadata{Params: 7e9}, errs: []string{"key given twice"}, errCols: []int{18}},
		{in: "burst: params=7B;rm", errs: []string{`value contains ';'`}},
		{in: "burst: params=$(id)", errs: []string{`value contains '$'`}},
		{in: "burst: params=７B", errs: []string{`value contains '７' (U+FF17)`}},
		{in: "burst: params=7\xffB", errs: []string{`value contains '�' (U+FFFD)`}},
		{in: "burst: workload=`id`", errs: []string{"value contains '`'"}},
		{in: "burst: params= dataset=1TB", want: Metadata{DatasetBytes: 1e12}, errs: []string{"empty value"}},
		{in: "burst: verbose", errs: []string{`"verbose" is not key=value`}},
		{in: "burst: workload=dance precision=fp64 capacity=cheap checkpoint_signal=KILL", errs: []string{"workload=dance", "precision=fp64", "capacity=cheap", "checkpoint_signal=KILL"}},
		{in: "burst: checkpoint_to=steps rebalance=checkpoint", want: Metadata{CheckpointTo: CheckpointToSteps, Rebalance: RebalanceCheckpoint}},
		{in: "burst: checkpoint_to=batch rebalance=drain", want: Metadata{}},
		{in: "burst: checkpoint_to=everyone rebalance=migrate", errs: []string{"checkpoint_to=everyone", "rebalance=migrate"}},
		{in: "burst: dataset=2XB epochs=-1 checkpoint=0s", errs: []string{"dataset=2XB", "epochs=-1", "checkpoint=0s"}},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, errs := ParseMetadata(c.in)
			got.Keys = nil
			if len(errs) != len(c.errs) {
				t.Fatalf("got %d errors %v, want %d (%v)", len(errs), errs, len(c.errs), c.errs)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), c.errs[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, e, c.errs[i])
				}
				var me *MetadataError
				if !errors.As(e, &me) || me.Hint == "" {
					t.Errorf("error %d is not a *MetadataError with a hint: %#v", i, e)
				}
				if i < len(c.errCols) && me.Pos != c.errCols[i] {
					t.Errorf("error %d at column %d, want %d", i, me.Pos, c.errCols[i])
				}
			}
			{
				if got.Params != c.want.Params || got.DatasetBytes != c.want.DatasetBytes || got.Tokens != c.want.Tokens ||
					got.Epochs != c.want.Epochs || got.Deadline != c.want.Deadline || got.Workload != c.want.Workload ||
					got.Precision != c.want.Precision || got.Checkpoint != c.want.Checkpoint || got.NoCheckpoint != c.want.NoCheckpoint ||
					got.CheckpointSignal != c.want.CheckpointSignal || got.Capacity != c.want.Capacity ||
					got.Method != c.want.Method || got.Sharding != c.want.Sharding || got.Seq != c.want.Seq || got.Batch != c.want.Batch ||
					got.Context != c.want.Context || got.Layers != c.want.Layers || got.Hidden != c.want.Hidden || got.Heads != c.want.Heads ||
					got.KVHeads != c.want.KVHeads || got.Latency != c.want.Latency || got.Throughput != c.want.Throughput ||
					got.CheckpointTo != c.want.CheckpointTo || got.Rebalance != c.want.Rebalance {
					t.Errorf("got %+v\nwant %+v", got, c.want)
				}
			}
		})
	}
}

func TestUnknownKeySuggestion(t *testing.T) {
	_, errs := ParseMetadata("burst: dedline=8h")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "did you mean deadline?") {
		t.Fatalf("got %v", errs)
	}
}

func TestTrainTokens(t *testing.T) {
	m := Metadata{DatasetBytes: 20e9, Epochs: 3}
	if got := m.TrainTokens(); got != 20e9/BytesPerToken*3 {
		t.Errorf("got %v", got)
	}
	m.Tokens = 1e9
	if got := m.TrainTokens(); got != 3e9 {
		t.Errorf("tokens= must win over dataset=: %v", got)
	}
}

func TestParseMetadataBody(t *testing.T) {
	m, errs := ParseMetadataBody("params=7B workload=inference")
	if len(errs) > 0 || m.Params != 7e9 || m.Workload != WorkloadInference {
		t.Fatalf("%+v %v", m, errs)
	}
}

func FuzzParseMetadata(f *testing.F) {
	for _, s := range []string{
		"burst: params=7B dataset=2TB deadline=8h workload=finetune precision=bf16 checkpoint=30m",
		"burst: tokens=1T epochs=0.5 deadline=1d2h3m checkpoint=none capacity=spot",
		"burst: params=$(reboot)", "burst:", "burst: a=b=c ,, x", "burst: deadline=99999999999d",
		"burst: params=1e9999 dataset=.TB",
		"burst: workload=qlora method=lora seq=8K batch=4 sharding=fsdp",
		"burst: workload=inference context=128K batch=64 latency=20ms throughput=10K layers=80 hidden=8192 heads=64 kv_heads=8",
		"burst: seq=16384K context=0 batch=1048577 method=full workload=lora",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, errs := ParseMetadata(s)
		for _, e := range errs {
			var me *MetadataError
			if !errors.As(e, &me) {
				t.Fatalf("error %v is not a *MetadataError", e)
			}
			if me.Pos < 1 || me.Pos > len(s) {
				t.Fatalf("column %d outside input of %d bytes", me.Pos, len(s))
			}
		}
		if m.Params < 0 || m.DatasetBytes < 0 || m.Tokens < 0 || m.Deadline < 0 || m.Checkpoint < 0 || m.Epochs < 0 ||
			m.Seq < 0 || m.Seq > MaxTokenLen || m.Context < 0 || m.Context > MaxTokenLen || m.Batch < 0 || m.Layers < 0 ||
			m.Hidden < 0 || m.Heads < 0 || m.KVHeads < 0 || m.Latency < 0 || m.Throughput < 0 {
			t.Fatalf("negative value from %q: %+v", s, m)
		}
		for _, k := range m.Keys {
			if shellUnsafe(k) != 0 {
				t.Fatalf("accepted key %q", k)
			}
		}
		// Every accepted value comes from the safe alphabet.
		if strings.ContainsAny(m.CheckpointSignal+string(m.Workload)+string(m.Precision)+string(m.Capacity)+string(m.Method)+string(m.Sharding), "$`;|&<>()'\" \\\n") {
			t.Fatalf("unsafe value accepted from %q: %+v", s, m)
		}
	})
}

func TestModelSignature(t *testing.T) {
	a, _ := ParseMetadata("burst: params=7B workload=lora seq=4K deadline=8h checkpoint=30m")
	b, _ := ParseMetadata("burst: deadline=2d seq=4096 method=lora workload=finetune params=7000M capacity=spot")
	if a.ModelSignature() != b.ModelSignature() {
		t.Errorf("same model, different signatures: %q vs %q", a.ModelSignature(), b.ModelSignature())
	}
	if want := "params=7e+09 workload=finetune method=lora seq=4096"; a.ModelSignature() != want {
		t.Errorf("signature %q, want %q", a.ModelSignature(), want)
	}
	c, _ := ParseMetadata("burst: params=7B workload=lora seq=8K")
	if a.ModelSignature() == c.ModelSignature() {
		t.Error("different seq, same signature")
	}
}
