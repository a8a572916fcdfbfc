package telemetry

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/statefile"
)

// Spool is the on-disk queue of records not yet acknowledged by the sink.
//
// Layout of Dir (created 0700, files 0600):
//
//	seg-<first seq, 20 digits>.log  append-only segments, one record a line:
//	                                 "<crc32c of json, 8 hex> <json>\n"
//	state.json                      {"acked":N,"dropped_records":N,"dropped_bytes":N}
//	                                 replaced atomically (write temp, fsync, rename, fsync dir)
//
// Fsync policy: Append writes each record with write(2) so an agent crash or
// restart loses nothing; segments are fsynced by Sync (the reporter calls it
// before every send attempt, i.e. once per interval) and on rotation and
// Close, so a power loss loses at most the records of one interval. The ack
// state is fsynced on every Ack. A torn last line (power loss mid-write) is
// truncated on open; a line failing its checksum elsewhere is skipped and
// counted in SpoolStats.Corrupt (its seq shows as a gap at the server).
//
// The total size of the segments is capped at MaxBytes: when an append goes
// over it, whole oldest segments are deleted and their unacknowledged
// records counted in DroppedRecords/DroppedBytes (persisted, and reported to
// the server in every sizerapi.ReportBatch).
type Spool struct {
	dir      string
	maxBytes int64
	segBytes int64

	mu      sync.Mutex
	segs    []*segment // ascending by first seq; last one is active
	active  *os.File
	closed  bool
	next    uint64 // seq of the next record
	st      spoolState
	cursor  cursor // where Pending starts reading
	pending int    // records not acked (approximate when segments were corrupt)
	corrupt int    // unreadable lines found when opening
}

type segment struct {
	path        string
	first, last uint64 // last == 0: empty
	size        int64
}

type cursor struct {
	seg   uint64 // first seq of segment
	off   int64
	after uint64 // every record before off has seq <= after
}

type spoolState struct {
	Acked          uint64 `json:"acked"`
	DroppedRecords uint64 `json:"dropped_records"`
	DroppedBytes   uint64 `json:"dropped_bytes"`
}

// SpoolOptions size the spool.
type SpoolOptions struct {
	MaxBytes     int64 // default 64 MiB
	SegmentBytes int64 // default MaxBytes/16
}

// SpoolStats describes the spool.
type SpoolStats struct {
	NextSeq        uint64
	Acked          uint64
	Pending        int
	Bytes          int64
	Segments       int
	DroppedRecords uint64
	DroppedBytes   uint64
	Corrupt        int // unreadable lines skipped since open
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const stateFile = "state.json"

// OpenSpool opens (creating if needed) the spool in dir and recovers its
// state: acknowledged sequence, next sequence, segments.
func OpenSpool(dir string, o SpoolOptions) (*Spool, error) {
	if o.MaxBytes == 0 {
		o.MaxBytes = 64 << 20
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = o.MaxBytes / 16
	}
	if o.MaxBytes < 4096 || o.SegmentBytes < 512 || o.SegmentBytes > o.MaxBytes/2 {
		return nil, fmt.Errorf("opening report spool %s: max bytes %d and segment bytes %d: want max >= 4096 and 512 <= segment <= max/2", dir, o.MaxBytes, o.SegmentBytes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening report spool: %w", err)
	}
	s := &Spool{dir: dir, maxBytes: o.MaxBytes, segBytes: o.SegmentBytes}
	if b, err := os.ReadFile(filepath.Join(dir, stateFile)); err == nil {
		if err := json.Unmarshal(b, &s.st); err != nil {
			return nil, fmt.Errorf("opening report spool: reading %s: %w (delete the file to resend everything still spooled)", filepath.Join(dir, stateFile), err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("opening report spool: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("opening report spool: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, "seg-") && strings.HasSuffix(name, ".log") {
			first, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "seg-"), ".log"), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("opening report spool: unexpected file %s (remove it)", filepath.Join(dir, name))
			}
			s.segs = append(s.segs, &segment{path: filepath.Join(dir, name), first: first})
		}
	}
	sort.Slice(s.segs, func(i, j int) bool { return s.segs[i].first < s.segs[j].first })
	s.next = s.st.Acked + 1
	for i, sg := range s.segs {
		last := i == len(s.segs)-1
		if err := s.scan(sg, last); err != nil {
			return nil, err
		}
		if sg.last >= s.next {
			s.next = sg.last + 1
		}
	}
	// Segments fully acknowledged can go (a crash may have left them).
	if err := s.gcLocked(); err != nil {
		return nil, err
	}
	if err := s.openActiveLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// scan reads a segment to learn its seq range and size, truncating a torn
// tail when it is the last segment.
func (s *Spool) scan(sg *segment, last bool) error {
	f, err := os.OpenFile(sg.path, os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("opening report spool segment: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var off int64
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 { // torn write
				if last {
					if err := f.Truncate(off); err != nil {
						return fmt.Errorf("truncating torn record in %s: %w", sg.path, err)
					}
				} else {
					s.corrupt++
					off += int64(len(line))
				}
			}
			break
		}
		if err != nil {
			return fmt.Errorf("reading report spool segment %s: %w", sg.path, err)
		}
		off += int64(len(line))
		rec, err := decodeLine(line)
		if err != nil {
			s.corrupt++
			continue
		}
		if rec.Seq > s.st.Acked {
			s.pending++
		}
		sg.last = rec.Seq
	}
	sg.size = off
	return nil
}

func encodeLine(r *sizerapi.Record) ([]byte, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding record %d: %w", r.Seq, err)
	}
	out := make([]byte, 0, len(js)+10)
	out = fmt.Appendf(out, "%08x ", crc32.Checksum(js, castagnoli))
	out = append(out, js...)
	return append(out, '\n'), nil
}

func decodeLine(line []byte) (sizerapi.Record, error) {
	var r sizerapi.Record
	if len(line) < 11 || line[8] != ' ' || line[len(line)-1] != '\n' {
		return r, errors.New("malformed spool line")
	}
	want, err := strconv.ParseUint(string(line[:8]), 16, 32)
	if err != nil {
		return r, errors.New("malformed spool line checksum")
	}
	js := line[9 : len(line)-1]
	if crc32.Checksum(js, castagnoli) != uint32(want) {
		return r, errors.New("spool line checksum mismatch")
	}
	if err := json.Unmarshal(js, &r); err != nil {
		return r, fmt.Errorf("decoding spool line: %w", err)
	}
	if r.Seq == 0 {
		return r, errors.New("spool line without seq")
	}
	return r, nil
}

func (s *Spool) openActiveLocked() error {
	if n := len(s.segs); n > 0 && s.segs[n-1].size < s.segBytes {
		f, err := os.OpenFile(s.segs[n-1].path, os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("opening report spool segment: %w", err)
		}
		s.active = f
		return nil
	}
	return s.rotateLocked()
}

func (s *Spool) rotateLocked() error {
	if s.active != nil {
		if err := s.active.Sync(); err != nil {
			return fmt.Errorf("syncing report spool segment: %w", err)
		}
		s.active.Close()
		s.active = nil
	}
	path := filepath.Join(s.dir, fmt.Sprintf("seg-%020d.log", s.next))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if fi, serr := os.Stat(path); errors.Is(err, fs.ErrExist) && serr == nil && fi.Size() == 0 {
		// left empty by a rotation that failed after creating it
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	}
	if err != nil {
		return fmt.Errorf("creating report spool segment: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		f.Close()
		return err
	}
	s.active = f
	s.segs = append(s.segs, &segment{path: path, first: s.next})
	return nil
}

// Append assigns the next sequence numbers to recs (setting their Seq) and
// writes them to the active segment.
func (s *Spool) Append(recs ...*sizerapi.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("appending to report spool: closed")
	}
	if s.active == nil { // a rotation failed (a full disk): try again
		if err := s.openActiveLocked(); err != nil {
			s.st.DroppedRecords += uint64(len(recs))
			return fmt.Errorf("appending to report spool %s (%d records lost): %w", s.dir, len(recs), statefile.Full(filepath.Join(s.dir, "seg"), err))
		}
	}
	for _, r := range recs {
		r.Seq = s.next
		line, err := encodeLine(r)
		if err != nil {
			return err
		}
		sg := s.segs[len(s.segs)-1]
		if sg.size > 0 && sg.size+int64(len(line)) > s.segBytes {
			if err := s.rotateLocked(); err != nil {
				return err
			}
			sg = s.segs[len(s.segs)-1]
		}
		if _, err := s.active.Write(line); err != nil {
			// a short write leaves part of a line: cut it off, so what is
			// appended once there is space again starts a line of its own
			if terr := s.active.Truncate(sg.size); terr != nil {
				err = fmt.Errorf("%w; cutting the torn line off: %v", err, terr)
			}
			s.st.DroppedRecords++
			s.st.DroppedBytes += uint64(len(line))
			return fmt.Errorf("writing record %d to report spool %s (the record is lost): %w", r.Seq, s.dir, statefile.Full(sg.path, err))
		}
		sg.size += int64(len(line))
		sg.last = r.Seq
		s.next++
		s.pending++
	}
	return s.enforceCapLocked()
}

func (s *Spool) totalLocked() int64 {
	var n int64
	for _, sg := range s.segs {
		n += sg.size
	}
	return n
}

// enforceCapLocked deletes whole oldest segments (never the active one)
// while the spool is over MaxBytes, counting what was not yet acked.
func (s *Spool) enforceCapLocked() error {
	changed := false
	for s.totalLocked() > s.maxBytes && len(s.segs) > 1 {
		sg := s.segs[0]
		if sg.last > s.st.Acked {
			from := max(sg.first, s.st.Acked+1)
			n := sg.last - from + 1
			s.st.DroppedRecords += n
			s.st.DroppedBytes += uint64(sg.size) // whole segment: close enough when partly acked
			s.pending -= int(n)
			// Records up to sg.last will never be sent: treat them as
			// handled so Pending does not look for them.
			s.st.Acked = sg.last
			changed = true
		}
		if err := os.Remove(sg.path); err != nil {
			return fmt.Errorf("dropping oldest report spool segment: %w", err)
		}
		s.segs = s.segs[1:]
	}
	if changed {
		return s.writeStateLocked()
	}
	return nil
}

// Pending returns up to max unacknowledged records in sequence order.
func (s *Spool) Pending(max int) ([]sizerapi.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sizerapi.Record
	for _, sg := range s.segs {
		if len(out) >= max {
			break
		}
		if sg.last <= s.st.Acked || sg.size == 0 {
			continue
		}
		var off int64
		if s.cursor.seg == sg.first && s.cursor.after <= s.st.Acked {
			off = s.cursor.off
		}
		f, err := os.Open(sg.path)
		if err != nil {
			return nil, fmt.Errorf("reading report spool: %w", err)
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("reading report spool: %w", err)
		}
		br := bufio.NewReader(io.LimitReader(f, sg.size-off))
		for len(out) < max {
			line, err := br.ReadBytes('\n')
			if err != nil {
				break // EOF (or a torn tail being written right now: never, we hold mu)
			}
			off += int64(len(line))
			rec, err := decodeLine(line)
			if err != nil || rec.Seq <= s.st.Acked {
				if rec.Seq <= s.st.Acked {
					s.cursor = cursor{seg: sg.first, off: off, after: rec.Seq}
				}
				continue
			}
			out = append(out, rec)
		}
		f.Close()
	}
	return out, nil
}

// Ack records that every record up to seq was delivered, fsyncs that, and
// deletes segments holding only delivered records.
func (s *Spool) Ack(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.st.Acked {
		return nil
	}
	if seq >= s.next {
		return fmt.Errorf("acknowledging record %d: only %d records were spooled", seq, s.next-1)
	}
	s.pending -= int(seq - s.st.Acked)
	if s.pending < 0 {
		s.pending = 0
	}
	s.st.Acked = seq
	if err := s.writeStateLocked(); err != nil {
		return err
	}
	return s.gcLocked()
}

// gcLocked removes non-active segments whose records are all acked.
func (s *Spool) gcLocked() error {
	for len(s.segs) > 0 {
		sg := s.segs[0]
		isActive := len(s.segs) == 1
		if isActive || sg.last > s.st.Acked {
			break
		}
		if err := os.Remove(sg.path); err != nil {
			return fmt.Errorf("removing delivered report spool segment: %w", err)
		}
		s.segs = s.segs[1:]
	}
	return nil
}

func (s *Spool) writeStateLocked() error {
	b, _ := json.Marshal(s.st)
	if err := statefile.WriteAtomic(filepath.Join(s.dir, stateFile), b, 0o600); err != nil {
		return fmt.Errorf("writing report spool state: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing report spool directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing report spool directory: %w", err)
	}
	return nil
}

// Sync fsyncs the active segment.
func (s *Spool) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		return nil
	}
	if err := s.active.Sync(); err != nil {
		return fmt.Errorf("syncing report spool segment: %w", err)
	}
	return nil
}

// Dropped is the number of records ever dropped for lack of space.
func (s *Spool) Dropped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.DroppedRecords
}

// Stats reports the spool's state.
func (s *Spool) Stats() SpoolStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SpoolStats{NextSeq: s.next, Acked: s.st.Acked, Pending: s.pending, Bytes: s.totalLocked(), Segments: len(s.segs),
		DroppedRecords: s.st.DroppedRecords, DroppedBytes: s.st.DroppedBytes, Corrupt: s.corrupt}
}

// Close fsyncs and closes the active segment.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.active == nil {
		return nil
	}
	err := s.active.Sync()
	if cerr := s.active.Close(); err == nil {
		err = cerr
	}
	s.active = nil
	if err != nil {
		return fmt.Errorf("closing report spool: %w", err)
	}
	return nil
}
