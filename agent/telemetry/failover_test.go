package telemetry

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// With other sizers listed, a batch the first does not answer goes to the
// next, which stays current; a sizer that refuses the batch is an answer.
func TestSinkFailsOver(t *testing.T) {
	var hits, refused atomic.Int32
	live := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if refused.Load() == 1 {
			http.Error(w, "bad batch", http.StatusBadRequest)
			return
		}
		w.Write([]byte(`{"accepted":1}`))
	}))
	defer live.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "https://" + ln.Addr().String() + "/v1/reports"
	ln.Close()
	h := &HTTPSink{URL: dead, Fallbacks: []string{live.URL + "/v1/reports"}, Client: live.Client()}
	ctx := context.Background()
	for i := range 3 {
		if err := h.Send(ctx, sizerapi.ReportBatch{Node: "n"}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if h.cur.Load() != 1 || hits.Load() != 3 {
		t.Errorf("current %d, %d posts answered, want the live sizer current after 3", h.cur.Load(), hits.Load())
	}
	refused.Store(1)
	if err := h.Send(ctx, sizerapi.ReportBatch{Node: "n"}); err == nil || hits.Load() != 4 {
		t.Errorf("a refused batch: %v after %d posts", err, hits.Load())
	}
	live.Close()
	if err := h.Send(ctx, sizerapi.ReportBatch{Node: "n"}); err == nil {
		t.Error("a batch with every sizer down was sent")
	}
	a := &Announcer{URL: dead, Client: live.Client()}
	if err := a.Announce(ctx, sizerapi.Interruption{}); err == nil {
		t.Error("an announcement to a dead sizer succeeded")
	}
}
