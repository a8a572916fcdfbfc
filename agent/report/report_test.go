package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// sizerStub is an HTTP server standing in for the sizer's report endpoint:
// it checks the bearer token and records every delivered seq, duplicates
// included, in arrival order.
type sizerStub struct {
	srv   *httptest.Server
	mu    sync.Mutex
	down  bool
	code  int // status when down
	seqs  []uint64
	drops []uint64 // sizerapi.ReportBatch.Dropped per batch
	token string
}

func newSizerStub(t *testing.T) *sizerStub {
	s := &sizerStub{token: "s3cret", code: http.StatusServiceUnavailable}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+s.token {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down {
			http.Error(w, "down", s.code)
			return
		}
		var b sizerapi.ReportBatch
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil || b.Node != "gpu-1" {
			http.Error(w, fmt.Sprintf("bad batch: %v", err), http.StatusBadRequest)
			return
		}
		for _, rec := range b.Records {
			s.seqs = append(s.seqs, rec.Seq)
		}
		s.drops = append(s.drops, b.Dropped)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sizerStub) setDown(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }
func (s *sizerStub) got() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.seqs...)
}

func (s *sizerStub) sink(t *testing.T) *HTTPSink {
	cred := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(cred, []byte(s.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &HTTPSink{URL: s.srv.URL + "/v1/reports", CredentialFile: cred}
}

func gpuRecord(i int) sizerapi.Record {
	return sizerapi.Record{Time: time.Unix(1_800_000_000+int64(i), 0).UTC(), Kind: sizerapi.KindGPU, GPUs: []sizerapi.GPUReading{{
		Index: 0, UUID: "GPU-x", UtilPercent: uint32(i % 101), MemoryUsedBytes: uint64(i) << 20, PIDs: []int{100 + i},
		JobIDs: []uint32{7},
	}}}
}

func addN(t *testing.T, r *Reporter, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := r.Add(gpuRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func wantSeqs(t *testing.T, got []uint64, from, to uint64) {
	t.Helper()
	if len(got) != int(to-from+1) {
		t.Fatalf("sink got %d records %v, want seqs %d..%d exactly once", len(got), got, from, to)
	}
	for i, s := range got {
		if s != from+uint64(i) {
			t.Fatalf("sink got seq %d at position %d, want %d (full: %v)", s, i, from+uint64(i), got)
		}
	}
}

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

func checkModes(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("spool dir mode %v, want 0700", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
}

// TestCrashBetweenSendAndAck: if the agent dies after the sizer stored a
// batch but before the ack hit the disk, the batch is resent with the same
// sequence numbers, so the server can drop it as a duplicate.
func TestCrashBetweenSendAndAck(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSpool(dir, SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		rec := gpuRecord(i)
		if err := s.Append(&rec); err != nil {
			t.Fatal(err)
		}
	}
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
	s, err := OpenSpool(dir, SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		rec := gpuRecord(i)
		s.Append(&rec)
	}
	s.Close()
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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		http.Error(w, "schema mismatch", http.StatusBadRequest)
	}))
	defer srv.Close()
	r, err := New(&HTTPSink{URL: srv.URL}, Options{Node: "gpu-1", Dir: t.TempDir()})
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
	err := (&HTTPSink{URL: stub.srv.URL, CredentialFile: bad}).Send(context.Background(), sizerapi.ReportBatch{Node: "gpu-1"})
	if err == nil || errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "check the credential") {
		t.Fatalf("wrong token: err = %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	err = (&HTTPSink{URL: stub.srv.URL, CredentialFile: empty}).Send(context.Background(), sizerapi.ReportBatch{Node: "gpu-1"})
	if err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty credential: err = %v", err)
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

func FuzzDecodeLine(f *testing.F) {
	rec := gpuRecord(1)
	rec.Seq = 1
	line, _ := encodeLine(&rec)
	f.Add(line)
	f.Add([]byte("00000000 {}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeLine(b)
		if err == nil {
			again, err := encodeLine(&r)
			if err != nil || r.Seq == 0 {
				t.Fatalf("decoded %q to %+v, re-encode err %v", b, r, err)
			}
			if _, err := decodeLine(again); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestCorruptLineSkipped: a record whose checksum fails (disk corruption)
// is skipped and counted; the records around it are still sent.
func TestCorruptLineSkipped(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSpool(dir, SpoolOptions{MaxBytes: 1 << 20, SegmentBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		rec := gpuRecord(i)
		s.Append(&rec)
	}
	s.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	if len(segs) < 2 {
		t.Fatalf("want several segments, got %v", segs)
	}
	b, _ := os.ReadFile(segs[0])
	i := strings.Index(string(b), `"seq":2,`)
	b[i+20] ^= 0x01 // flip a bit inside record 2
	os.WriteFile(segs[0], b, 0o600)
	s2, err := OpenSpool(dir, SpoolOptions{MaxBytes: 1 << 20, SegmentBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	p, _ := s2.Pending(100)
	var seqs []uint64
	for _, r := range p {
		seqs = append(seqs, r.Seq)
	}
	if len(seqs) != 19 || seqs[0] != 1 || seqs[1] != 3 || seqs[18] != 20 || s2.Stats().Corrupt != 1 {
		t.Fatalf("pending seqs %v, stats %+v; want 1,3..20 and one corrupt", seqs, s2.Stats())
	}
}
