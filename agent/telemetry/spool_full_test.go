package telemetry

import (
	"os"
	"strings"
	"testing"
)

// TestDiskFullLosesOnlyThatRecord: a write the file system refuses (here
// /dev/full, which answers every write with ENOSPC) loses that record,
// counted as dropped, with an error saying the disk is full and what to
// do; once writes succeed again the spool carries on, the records before
// and after intact.
func TestDiskFullLosesOnlyThatRecord(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSpool(dir, SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := gpuRecord(1)
	if err := s.Append(&first); err != nil {
		t.Fatal(err)
	}
	seg := s.segs[len(s.segs)-1].path
	good := s.active
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	s.active = full
	lost := gpuRecord(2)
	err = s.Append(&lost)
	if err == nil || !strings.Contains(err.Error(), "is full: free space there") || !strings.Contains(err.Error(), "the record is lost") {
		t.Fatalf("a full disk: %v", err)
	}
	if s.Dropped() != 1 {
		t.Errorf("dropped %d records, want the one lost", s.Dropped())
	}
	full.Close()
	s.active = good
	after := gpuRecord(3)
	if err := s.Append(&after); err != nil {
		t.Fatalf("once there is space: %v", err)
	}
	p, err := s.Pending(10)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, r := range p {
		seqs = append(seqs, r.Seq)
	}
	wantSeqs(t, seqs, 1, 2)
	if _, err := os.Stat(seg); err != nil {
		t.Fatal(err)
	}
}

// TestFailedRotationIsRetried: a segment that could not be created (a
// full disk) leaves no active segment; the next append makes one instead
// of calling the spool closed.
func TestFailedRotationIsRetried(t *testing.T) {
	s, err := OpenSpool(t.TempDir(), SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.active.Close()
	s.active = nil // what a failed rotateLocked leaves
	r := gpuRecord(1)
	if err := s.Append(&r); err != nil {
		t.Fatalf("append after a failed rotation: %v", err)
	}
	s.Close()
	if err := s.Append(&r); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("append after Close: %v", err)
	}
}
