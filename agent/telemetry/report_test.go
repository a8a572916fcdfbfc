package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// TestOutageAndRestartExactlyOnce: the sizer goes down, the agent keeps
// sampling, restarts from the same state dir, the sizer comes back: every
// record arrives exactly once, in sequence order.
func TestOutageAndRestartExactlyOnce(t *testing.T) {
	stub := newSizerStub(t)
	dir := filepath.Join(t.TempDir(), "spool")
	ctx := context.Background()
	opts := Options{Node: "gpu-1", Dir: dir, MaxBatch: 7, Spool: SpoolOptions{MaxBytes: 1 << 20, SegmentBytes: 4096}}

	r1, err := New(stub.sink(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	addN(t, r1, 0, 10)
	if err := r1.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, stub.got(), 1, 10)

	stub.setDown(true)
	for round := 0; round < 5; round++ {
		addN(t, r1, 10+10*round, 10)
		if err := r1.Flush(ctx); err == nil || !strings.Contains(err.Error(), "503") {
			t.Fatalf("flush during outage: err = %v, want a 503 error", err)
		}
	}
	if st := r1.Stats(); st.Spool.Pending != 50 || st.SendFailures != 5 || st.Spool.Segments < 2 {
		t.Fatalf("stats during outage = %+v, want 50 pending over several segments", st)
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	checkModes(t, dir)

	// Agent restarts; the sizer is still down for a while.
	r2, err := New(stub.sink(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r2.Close() })
	if st := r2.Stats(); st.Spool.Pending != 50 || st.Spool.NextSeq != 61 || st.Spool.Acked != 10 {
		t.Fatalf("after restart stats = %+v, want 50 pending, next seq 61, acked 10", st.Spool)
	}
	addN(t, r2, 60, 20)
	if err := r2.Flush(ctx); err == nil {
		t.Fatal("flush succeeded while the sizer is down")
	}
	stub.setDown(false)
	if err := r2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, stub.got(), 1, 80)
	if st := r2.Stats(); st.Spool.Pending != 0 || st.Sent != 70 || st.Spool.Segments != 1 {
		t.Fatalf("after recovery stats = %+v, want nothing pending and delivered segments removed", st)
	}
	// Nothing is sent twice by a further flush.
	if err := r2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, stub.got(), 1, 80)
}

// TestCrashBetweenSendAndAck: if the agent dies after the sizer stored a
// batch but before the ack hit the disk, the batch is resent with the same
// sequence numbers, so the server can drop it as a duplicate.
func TestCrashBetweenSendAndAck(t *testing.T) {
	dir := t.TempDir()
	s := spoolWith(t, dir, SpoolOptions{}, 5)
	sent, err := s.Pending(100)
	if err != nil || len(sent) != 5 {
		t.Fatalf("pending = %d, %v", len(sent), err)
	}
	s.Close() // "crash": no Ack
	s2, err := OpenSpool(dir, SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	again, err := s2.Pending(100)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 5 {
		t.Fatalf("resent %d records, want 5", len(again))
	}
	for i := range again {
		a, _ := json.Marshal(again[i])
		b, _ := json.Marshal(sent[i])
		if string(a) != string(b) {
			t.Fatalf("record %d changed across restart:\n%s\n%s", i, a, b)
		}
	}
}

// TestCapDropsOldest: with the sizer down long enough to fill the buffer,
// whole oldest segments go, the drop is counted and reported, and what
// remains arrives in order.
func TestCapDropsOldest(t *testing.T) {
	stub := newSizerStub(t)
	stub.setDown(true)
	dir := t.TempDir()
	r, err := New(stub.sink(t), Options{Node: "gpu-1", Dir: dir, MaxBatch: 50, Spool: SpoolOptions{MaxBytes: 8192, SegmentBytes: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const total = 300
	addN(t, r, 0, total)
	st := r.Stats().Spool
	if st.DroppedRecords == 0 || st.Bytes > 8192 {
		t.Fatalf("stats = %+v, want drops and at most 8192 bytes", st)
	}
	stub.setDown(false)
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := stub.got()
	if uint64(len(got))+st.DroppedRecords != total {
		t.Fatalf("received %d + dropped %d != %d", len(got), st.DroppedRecords, total)
	}
	wantSeqs(t, got, st.DroppedRecords+1, total)
	for _, d := range stub.drops {
		if d != st.DroppedRecords {
			t.Fatalf("batch reported dropped=%d, want %d", d, st.DroppedRecords)
		}
	}
	// The drop count survives a restart.
	r.Close()
	r2, err := New(stub.sink(t), Options{Node: "gpu-1", Dir: dir, Spool: SpoolOptions{MaxBytes: 8192, SegmentBytes: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if got := r2.Stats().Spool.DroppedRecords; got != st.DroppedRecords {
		t.Fatalf("dropped after restart = %d, want %d", got, st.DroppedRecords)
	}
}

// TestTornTail: a partial last line (power loss mid-write) is cut off on
// open and sequence numbering continues after the last whole record.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	spoolWith(t, dir, SpoolOptions{}, 3).Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`1234abcd {"seq":4,"ti`)
	f.Close()
	s2, err := OpenSpool(dir, SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	rec := gpuRecord(9)
	if err := s2.Append(&rec); err != nil {
		t.Fatal(err)
	}
	p, err := s2.Pending(10)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, r := range p {
		seqs = append(seqs, r.Seq)
	}
	wantSeqs(t, seqs, 1, 4)
}

func TestRejectedBatchIsDroppedNotRetried(t *testing.T) {
	var calls int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		http.Error(w, "schema mismatch", http.StatusBadRequest)
	}))
	defer srv.Close()
	r, err := New(&HTTPSink{URL: srv.URL, Client: srv.Client()}, Options{Node: "gpu-1", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addN(t, r, 0, 3)
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); calls != 1 || st.Rejected != 3 || st.Spool.Pending != 0 {
		t.Fatalf("calls %d, stats %+v; want one call and 3 rejected", calls, st)
	}
}

func TestHTTPSinkErrors(t *testing.T) {
	stub := newSizerStub(t)
	bad := filepath.Join(t.TempDir(), "token")
	os.WriteFile(bad, []byte("wrong\n"), 0o600)
	err := (&HTTPSink{URL: stub.srv.URL, CredentialFile: bad, Client: stub.srv.Client()}).Send(context.Background(), sizerapi.ReportBatch{Node: "gpu-1"})
	if err == nil || errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "check the credential") {
		t.Fatalf("wrong token: err = %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	err = (&HTTPSink{URL: stub.srv.URL, CredentialFile: empty, Client: stub.srv.Client()}).Send(context.Background(), sizerapi.ReportBatch{Node: "gpu-1"})
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty credential: err = %v", err)
	}
	// plain HTTP, or no pinned client, is refused before anything is sent
	for _, s := range []*HTTPSink{{URL: strings.Replace(stub.srv.URL, "https", "http", 1), CredentialFile: bad, Client: stub.srv.Client()}, {URL: stub.srv.URL, CredentialFile: bad}} {
		if err := s.Send(context.Background(), sizerapi.ReportBatch{Node: "gpu-1"}); err == nil || !strings.Contains(err.Error(), "https only") {
			t.Errorf("%s without TLS pinning: %v", s.URL, err)
		}
	}
}

func TestRunFlushesOnIntervalAndAtExit(t *testing.T) {
	stub := newSizerStub(t)
	r, err := New(stub.sink(t), Options{Node: "gpu-1", Dir: t.TempDir(), Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	addN(t, r, 0, 3)
	for len(stub.got()) < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	addN(t, r, 3, 2)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, stub.got(), 1, 5)
}

func TestTrackerSummary(t *testing.T) {
	tr := NewTracker(time.Second, 5)
	t0 := time.Unix(1_800_000_000, 0)
	// Job 7 on two GPUs for 20 ticks: GPU A at 90 %, GPU B idle (0 %) for
	// the first 10 ticks then 50 %. Job 8 on GPU C for 3 ticks.
	for i := 0; i < 20; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		b := uint32(0)
		if i >= 10 {
			b = 50
		}
		rs := []sizerapi.GPUReading{
			{Time: at, UUID: "A", UtilPercent: 90, MemoryUsedBytes: uint64(10+i) << 30, MemoryTotalBytes: 80 << 30, JobIDs: []uint32{7}},
			{Time: at, UUID: "B", UtilPercent: b, MemoryUsedBytes: 5 << 30, MemoryTotalBytes: 80 << 30, JobIDs: []uint32{7}},
			{Time: at, UUID: "D", UtilPercent: 99},
		}
		if i < 3 {
			rs = append(rs, sizerapi.GPUReading{Time: at, UUID: "C", UtilPercent: 40, JobIDs: []uint32{8}})
		}
		tr.Observe(rs)
	}
	done := tr.FinishGone(t0.Add(10 * time.Second))
	if len(done) != 1 || done[0].JobID != 8 || done[0].GPUSeconds != 3 || done[0].MeanUtilPercent != 40 {
		t.Fatalf("FinishGone = %+v, want job 8 with 3 GPU-seconds at 40 %%", done)
	}
	s, ok := tr.Finish(7)
	if !ok {
		t.Fatal("job 7 unknown")
	}
	want := sizerapi.JobSummary{JobID: 7, Start: t0, End: t0.Add(19 * time.Second), GPUs: []string{"A", "B"},
		PeakMemoryBytes: 29 << 30, MemoryTotalBytes: 80 << 30,
		MeanUtilPercent: (20*90 + 10*50) / 40.0, P95UtilPercent: 90, GPUSeconds: 40, IdleGPUSeconds: 10}
	a, _ := json.Marshal(s)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Fatalf("summary\n got %s\nwant %s", a, b)
	}
	if _, ok := tr.Finish(7); ok {
		t.Fatal("job 7 finished twice")
	}
	if len(tr.Active()) != 0 {
		t.Fatalf("active = %v", tr.Active())
	}
}

// spoolWith opens a spool in dir holding n GPU records (gpuRecord 0..n-1).
func spoolWith(t *testing.T, dir string, o SpoolOptions, n int) *Spool {
	t.Helper()
	s, err := OpenSpool(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		rec := gpuRecord(i)
		if err := s.Append(&rec); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
