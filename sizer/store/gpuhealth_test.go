package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// GPU health events on both drivers: stored with the instance's type and
// zone from its launch record, a resent record (same instance, node and
// seq) stored once, read newest first from since, at most limit.
func TestGPUHealthEvents(t *testing.T) { forDrivers(t, testGPUHealthEvents) }

func testGPUHealthEvents(t *testing.T, d driverCase) {
	ctx := context.Background()
	s := d.fresh(t).open(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := s.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: "i-1", Node: "gpu-1", InstanceType: "p5.48xlarge", Zone: "us-east-1a",
		Capacity: "spot", Time: t0}, 30); err != nil {
		t.Fatal(err)
	}
	xid := sizerapi.GPUHealth{Time: t0.Add(time.Minute), Kind: "xid", Xid: 79, GPU: 3, BusID: "0000:b3:00.0", Action: "replace",
		Reason: "gpu: Xid 79 on GPU 3", Jobs: []uint32{10}}
	ecc := sizerapi.GPUHealth{Time: t0.Add(2 * time.Minute), Kind: "ecc_uncorrected_volatile", GPU: 1, Count: 2, Action: "note"}
	gate := sizerapi.GPUHealth{Time: t0.Add(3 * time.Minute), Kind: "gpu_lost", GPU: -1, Action: "replace", Gate: true}
	batch := func(seq uint64, h sizerapi.GPUHealth) sizerapi.ReportBatch {
		return sizerapi.ReportBatch{Node: "gpu-1", InstanceID: "i-1", GPUSource: sizerapi.GPUSourceNVML,
			Records: []sizerapi.Record{{Seq: seq, Time: h.Time, Kind: sizerapi.KindGPUHealth, Health: &h}}}
	}
	for i, h := range []sizerapi.GPUHealth{xid, ecc, xid, gate} {
		seq := uint64(i + 1)
		if i == 2 {
			seq = 1 // the first record again
		}
		if _, err := s.AddBatch(ctx, batch(seq, h)); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	rows, err := s.GPUHealthEvents(ctx, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d events stored, want 3 (the resent record once): %+v", len(rows), rows)
	}
	for i, want := range []sizerapi.GPUHealth{gate, ecc, xid} {
		r := rows[i]
		if r.InstanceID != "i-1" || r.Node != "gpu-1" || r.InstanceType != "p5.48xlarge" || r.Zone != "us-east-1a" {
			t.Errorf("event %d's place: %+v", i, r)
		}
		if !reflect.DeepEqual(r.Event, want) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, r.Event, want)
		}
	}
	if rows, err := s.GPUHealthEvents(ctx, t0.Add(90*time.Second), 1); err != nil || len(rows) != 1 || rows[0].Event.Kind != "gpu_lost" {
		t.Errorf("since 10:01:30, limit 1: %+v %v", rows, err)
	}
}
