package telemetry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
	spoolWith(t, dir, SpoolOptions{MaxBytes: 1 << 20, SegmentBytes: 1024}, 20).Close()
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

// FuzzOpenSpool: whatever is in the spool directory (state.json and a
// segment, as a crash or a disk fault may leave them), opening it never
// panics, and an opened spool hands out records in sequence order.
func FuzzOpenSpool(f *testing.F) {
	rec := gpuRecord(1)
	rec.Seq = 1
	line, _ := encodeLine(&rec)
	f.Add([]byte(`{"acked":0,"dropped_records":0,"dropped_bytes":0}`), line)
	f.Add([]byte(`{"acked":18446744073709551615}`), line)
	f.Add([]byte(`nope`), []byte("zz\n"))
	f.Fuzz(func(t *testing.T, state, seg []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "state.json"), state, 0o600)
		os.WriteFile(filepath.Join(dir, "seg-1.log"), seg, 0o600)
		s, err := OpenSpool(dir, SpoolOptions{MaxBytes: 1 << 20, SegmentBytes: 4096})
		if err != nil {
			return
		}
		defer s.Close()
		recs, err := s.Pending(100)
		if err != nil {
			return
		}
		for i := 1; i < len(recs); i++ {
			if recs[i].Seq <= recs[i-1].Seq {
				t.Fatalf("records out of order: %d after %d", recs[i].Seq, recs[i-1].Seq)
			}
		}
	})
}
