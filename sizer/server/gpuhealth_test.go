package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// TestGPUHealthReports: a node's GPU health event is stored with its
// instance's type and zone (the sizer's records, not the body's), jobs not
// on the node are dropped, malformed events are refused, and the metric
// counts it.
func TestGPUHealthReports(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	cred, inst := f.node(t, "gpu-1", "g6.xlarge", "us-east-1a", true)
	f.runs(10, "gpu-1")
	f.runs(20, "gpu-2")
	nc := f.client(t, cred)
	now := f.clk.Now()
	for _, bad := range []sizerapi.GPUHealth{
		{Kind: "xid", Xid: 0, Action: "replace"},
		{Kind: "melted", Action: "replace"},
		{Kind: "gpu_lost", Action: "drain"},
		{Kind: "gpu_lost", Action: "replace", GPU: 99},
		{Kind: "gpu_lost", Action: "replace", Reason: strings.Repeat("x", 300)},
	} {
		b := bad
		_, err := nc.Report(ctx, sizerapi.ReportBatch{GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{{Seq: 1, Time: now, Kind: sizerapi.KindGPUHealth, Health: &b}}})
		if err == nil || apiCode(err) != sizerapi.CodeBadRequest {
			t.Errorf("%+v: %v, want bad request", bad, err)
		}
	}
	if _, err := nc.Report(ctx, sizerapi.ReportBatch{GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{{Seq: 1, Time: now, Kind: sizerapi.KindGPUHealth}}}); err == nil {
		t.Error("a gpu_health record without health was accepted")
	}
	h := sizerapi.GPUHealth{Time: now, Kind: "xid", Xid: 79, GPU: 3, BusID: "0000:b3:00.0", Action: "replace", Reason: "gpu: Xid 79 on GPU 3 (0000:b3:00.0)", Jobs: []uint32{10, 20}}
	res, err := nc.Report(ctx, sizerapi.ReportBatch{GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{{Seq: 1, Time: now, Kind: sizerapi.KindGPUHealth, Health: &h}}})
	if err != nil || res.Accepted != 1 {
		t.Fatalf("report: %+v %v", res, err)
	}
	rows, err := f.srv.st.GPUHealthEvents(ctx, now.Add(-time.Hour), 0)
	if err != nil || len(rows) != 1 {
		t.Fatalf("stored: %+v %v", rows, err)
	}
	r := rows[0]
	if r.InstanceID != inst || r.Node != "gpu-1" || r.InstanceType != "g6.xlarge" || r.Zone != "us-east-1a" || r.Event.Xid != 79 || r.Event.GPU != 3 ||
		r.Event.Reason != h.Reason || len(r.Event.Jobs) != 1 || r.Event.Jobs[0] != 10 {
		t.Errorf("stored row %+v", r)
	}
	if m := f.metrics(t); !strings.Contains(m, `burst_sizer_gpu_health_events_total{action="replace",event="xid_79"} 1`) {
		t.Errorf("metric missing:\n%s", grepLines(m, "gpu_health"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
