package jobmeta

import (
	"errors"
	"strings"
	"testing"
)

// TestBounds: every numeric key refuses a value beyond its documented
// bound with the key, the value, the bound and a fix, and accepts the
// largest published figures.
func TestBounds(t *testing.T) {
	cases := []struct {
		in   string
		errs []string // "" for none
	}{
		// issue 31: epochs=1e9 gave a $50 billion estimate
		{"burst: params=7B tokens=1B epochs=1e9", []string{"epochs=1e9 is above the most burst accepts (10K)", "check the value and its unit"}},
		{"burst: params=7B tokens=1B epochs=10000", nil},
		{"burst: params=7B tokens=1T epochs=5000", []string{"(epochs): the job would process 5P tokens", "above the most burst accepts (1P)"}},
		{"burst: params=7B dataset=2PB epochs=3", []string{"(epochs): the job would process 1.5P tokens"}},
		{"burst: params=7B dataset=5PB", []string{"dataset=5PB is above the most burst accepts (4PB)"}},
		{"burst: params=7B tokens=2000T", []string{"tokens=2000T is above the most burst accepts (1P)"}},
		{"burst: params=405B tokens=15.6T", nil}, // Llama 3.1 405B
		{"burst: params=2T tokens=15T", nil},
		{"burst: params=200T", []string{"params=200T is above the most burst accepts (100T)", "e.g. params=7B"}},
		{"burst: params=10", []string{"params=10 is below the least burst accepts (1K)"}},
		{"burst: deadline=400d", []string{"deadline=400d is above the most burst accepts (8760h0m0s)"}},
		{"burst: checkpoint=0.5ns", []string{"checkpoint=0.5ns"}},
		{"burst: deadline=365d checkpoint=30d", nil},
		{"burst: batch=65536 layers=1000 hidden=262144 heads=10000 kv_heads=10000", nil},
		{"burst: batch=65537", []string{"batch=65537 is above the most burst accepts (65536)"}},
		{"burst: layers=1001", []string{"layers=1001 is above the most burst accepts (1000)", "Llama 3.1 405B has 126 layers"}},
		{"burst: hidden=0", []string{"hidden=0 is below the least burst accepts (1)"}},
		{"burst: heads=10001", []string{"heads=10001 is above"}},
		{"burst: seq=16384K context=16M", nil},
		{"burst: seq=0", []string{"seq=0 is below the least burst accepts (1)"}},
		{"burst: workload=inference latency=2h", []string{"latency=2h is above the most burst accepts (1h0m0s)"}},
		{"burst: workload=inference throughput=2T", []string{"throughput=2T is above the most burst accepts (1T)"}},
		{"burst: workload=inference throughput=0", []string{"throughput=0 is below the least"}},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			_, errs := ParseMetadata(c.in)
			if len(c.errs) == 0 {
				if len(errs) != 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("want one error, got %v", errs)
			}
			var me *MetadataError
			if !errors.As(errs[0], &me) || me.Pos < 1 || me.Hint == "" {
				t.Fatalf("not a *MetadataError with a column and a hint: %#v", errs[0])
			}
			for _, w := range c.errs {
				if !strings.Contains(errs[0].Error(), w) {
					t.Errorf("%q does not say %q", errs[0], w)
				}
			}
		})
	}
}

// TestBoundsCoverNumericKeys: every key that takes a number has a bound.
func TestBoundsCoverNumericKeys(t *testing.T) {
	for _, k := range []string{"params", "tokens", "dataset", "epochs", "deadline", "checkpoint", "seq", "batch", "context", "layers", "hidden", "heads", "kv_heads", "latency", "throughput"} {
		if _, ok := Bounds[k]; !ok {
			t.Errorf("no bound for %s", k)
		}
	}
	for k, b := range Bounds {
		if b.Key != k || b.Min <= 0 || b.Max <= b.Min || b.Why == "" {
			t.Errorf("bound %s: %+v", k, b)
		}
	}
}

// FuzzBounds: whatever is accepted lies within the bounds.
func FuzzBounds(f *testing.F) {
	for _, s := range []string{"burst: params=7B tokens=1B epochs=1e9", "burst: dataset=4PB epochs=1", "burst: params=99999T",
		"burst: deadline=365d1h", "burst: batch=65536 seq=16M", "burst: tokens=1P epochs=1.0000001", "burst: throughput=1e12"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, _ := ParseMetadata(s)
		in := func(key string, v float64) {
			if b := Bounds[key]; v != 0 && (v < b.Min || v > b.Max) {
				t.Fatalf("%s=%v accepted from %q, outside [%v, %v]", key, v, s, b.Min, b.Max)
			}
		}
		in("params", m.Params)
		in("tokens", m.Tokens)
		in("dataset", m.DatasetBytes)
		in("epochs", m.Epochs)
		in("deadline", m.Deadline.Seconds())
		in("checkpoint", m.Checkpoint.Seconds())
		in("batch", float64(m.Batch))
		in("layers", float64(m.Layers))
		in("hidden", float64(m.Hidden))
		in("heads", float64(m.Heads))
		in("kv_heads", float64(m.KVHeads))
		in("seq", float64(m.Seq))
		in("context", float64(m.Context))
		in("latency", m.Latency.Seconds())
		in("throughput", m.Throughput)
		if m.TrainTokens() > MaxTrainTokens {
			// the job is refused (crossCheck), but the parsed values stay
			if _, errs := ParseMetadata(s); len(errs) == 0 {
				t.Fatalf("%v tokens accepted from %q", m.TrainTokens(), s)
			}
		}
	})
}
