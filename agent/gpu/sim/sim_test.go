package sim

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/burst-hpc/burst/agent/gpu"
)

var _ gpu.Reader = (*Reader)(nil)

func run(t *testing.T, seed uint64, ticks int) [][]gpu.Sample {
	t.Helper()
	t0 := time.Unix(1_800_000_000, 0)
	r, err := New(Options{GPUs: 4, Seed: seed, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Assign(0, "job-1", 100); err != nil {
		t.Fatal(err)
	}
	if err := r.Assign(2, "job-2", 200, 201); err != nil {
		t.Fatal(err)
	}
	var out [][]gpu.Sample
	for i := 0; i < ticks; i++ {
		s, err := r.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestDeterministicAndSeeded(t *testing.T) {
	a, b := run(t, 7, 400), run(t, 7, 400)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different samples")
	}
	c := run(t, 8, 400)
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave identical samples")
	}
	var busy0, busy1 int
	for _, tick := range a {
		if tick[1].UtilPercent != 0 || tick[1].PIDs != nil || tick[3].UtilPercent != 0 {
			t.Fatalf("unassigned GPU shows activity: %+v", tick[1])
		}
		if tick[0].UtilPercent > 100 || tick[2].UtilPercent > 100 {
			t.Fatalf("utilisation over 100: %+v", tick)
		}
		if tick[0].UtilPercent > 20 {
			busy0++
		}
		if tick[2].UtilPercent > 20 {
			busy1++
		}
		if !reflect.DeepEqual(tick[2].PIDs, []int{200, 201}) {
			t.Fatalf("GPU 2 PIDs = %v", tick[2].PIDs)
		}
	}
	if busy0 < 300 || busy1 < 300 {
		t.Fatalf("assigned GPUs busy in only %d and %d of 400 ticks", busy0, busy1)
	}
}

func TestAssignOutOfRange(t *testing.T) {
	r, _ := New(Options{GPUs: 2})
	if err := r.Assign(2, "x"); err == nil {
		t.Fatal("Assign(2) on 2 GPUs succeeded")
	}
	if _, err := New(Options{GPUs: -1}); err == nil {
		t.Fatal("New(-1) succeeded")
	}
}
