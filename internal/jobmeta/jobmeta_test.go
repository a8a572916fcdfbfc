package jobmeta

import (
	"errors"
	"strings"
	"testing"
	"time"
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
			want: Metadata{Params: 1.5e12, Tokens: 300e9, Epochs: 2, Deadline: 60 * time.Hour, CheckpointSignal: "USR1", Capacity: CapacityOnDemand},
		},
		{in: "burst: dataset=800GiB params=350M", want: Metadata{DatasetBytes: 800 << 30, Params: 350e6}},
		{in: "burst: dataset=20GB params=125K workload=lora precision=int4", want: Metadata{DatasetBytes: 20e9, Params: 125e3, Workload: WorkloadLoRA, Precision: PrecisionInt4}},
		{in: "burst: checkpoint=none workload=inference", want: Metadata{NoCheckpoint: true, Workload: WorkloadInference}},
		{in: "burst: workload=sft precision=bfloat16 capacity=spot", want: Metadata{Workload: WorkloadFinetune, Precision: PrecisionBF16, Capacity: CapacitySpot}},
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
		{in: "burst: workload=`id`", errs: []string{"value contains '`'"}},
		{in: "burst: params= dataset=1TB", want: Metadata{DatasetBytes: 1e12}, errs: []string{"empty value"}},
		{in: "burst: verbose", errs: []string{`"verbose" is not key=value`}},
		{in: "burst: workload=dance precision=fp64 capacity=cheap checkpoint_signal=KILL", errs: []string{"workload=dance", "precision=fp64", "capacity=cheap", "checkpoint_signal=KILL"}},
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
					got.CheckpointSignal != c.want.CheckpointSignal || got.Capacity != c.want.Capacity {
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
		if m.Params < 0 || m.DatasetBytes < 0 || m.Tokens < 0 || m.Deadline < 0 || m.Checkpoint < 0 || m.Epochs < 0 {
			t.Fatalf("negative value from %q: %+v", s, m)
		}
		for _, k := range m.Keys {
			if shellUnsafe(k) != 0 {
				t.Fatalf("accepted key %q", k)
			}
		}
		// Every accepted value comes from the safe alphabet.
		if strings.ContainsAny(m.CheckpointSignal+string(m.Workload)+string(m.Precision)+string(m.Capacity), "$`;|&<>()'\" \\\n") {
			t.Fatalf("unsafe value accepted from %q: %+v", s, m)
		}
	})
}
