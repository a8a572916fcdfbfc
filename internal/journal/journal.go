// Package journal is the spend-event journal of sizer.state_dir
// (instance-events.jsonl): what burst-resume and burst-suspend could not
// tell the sizer at once (launches, terminations, job runs) and every
// launch intent (written before its CreateFleet), one JSON object a line,
// replayed to the sizer in order.
//
// The file is shared by every hook process and the sizer's local spend
// path (internal/statefile does the locking):
//
//   - an append takes the file's flock, writes one whole line (after a
//     newline of its own when a crash left the last line cut short) and
//     fsyncs before it returns;
//   - a replay takes a second lock (one replay at a time), reads the file
//     under the file lock, sends the leading lines it can, and then, under
//     the file lock again and only when something was sent or dropped,
//     rewrites the file atomically (temporary file, fsync, rename) without
//     them, keeping every line appended meanwhile;
//   - a line that is not a complete entry is never sent: a cut-short last
//     line stays where it is (it may be the only trace of an event), any
//     other bad line moves to instance-events.jsonl.corrupt for the admin.
package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/statefile"
)

// FileName is the journal inside the state directory.
const FileName = "instance-events.jsonl"

// Perm is the journal's mode: it names accounts and users.
const Perm = 0o600

// Entry kinds.
const (
	KindLaunch    = "launch"
	KindTerminate = "terminate"
	KindIntent    = "intent"
	KindRun       = "run"
)

// Entry is one journal line.
type Entry struct {
	Kind   string                  `json:"kind"`
	Event  *sizerapi.InstanceEvent `json:"event,omitempty"`  // launch, terminate
	Intent *sizerapi.LaunchIntent  `json:"intent,omitempty"` // intent
	Run    *sizerapi.JobRun        `json:"run,omitempty"`    // run
}

// Valid says whether the entry is complete: a known kind with its payload.
func (e Entry) Valid() error {
	switch e.Kind {
	case KindLaunch, KindTerminate:
		if e.Event == nil || e.Event.InstanceID == "" || e.Event.Time.IsZero() {
			return fmt.Errorf("%s entry without its instance id and time", e.Kind)
		}
		if e.Kind == KindLaunch && e.Event.InstanceType == "" {
			return errors.New("launch entry without an instance type")
		}
	case KindIntent:
		if e.Intent == nil || e.Intent.ClientToken == "" || len(e.Intent.Nodes) == 0 {
			return errors.New("intent entry without its client token and nodes")
		}
	case KindRun:
		if e.Run == nil || e.Run.JobID == "" || len(e.Run.Nodes) == 0 || e.Run.Start.IsZero() {
			return errors.New("run entry without its job, nodes and start")
		}
	default:
		return fmt.Errorf("unknown kind %q", e.Kind)
	}
	return nil
}

// Line is one complete line of the file: its entry, or why it is not one.
type Line struct {
	Raw   []byte // without the newline
	Entry Entry
	Err   error // non-nil: not an entry (corrupt)
}

// Parsed is a journal's content.
type Parsed struct {
	Lines []Line
	// Tail is what follows the last newline: a line a crash cut short (or
	// one being written by a process that does not lock). Never an entry.
	Tail []byte
}

// Entries returns the valid entries, in order.
func (p Parsed) Entries() []Entry {
	var out []Entry
	for _, l := range p.Lines {
		if l.Err == nil {
			out = append(out, l.Entry)
		}
	}
	return out
}

// Parse splits a journal into lines and decodes each. Empty lines are
// skipped; it never fails.
func Parse(data []byte) Parsed {
	var p Parsed
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			p.Tail = data
			break
		}
		raw := data[:i]
		data = data[i+1:]
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		l := Line{Raw: raw}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&l.Entry); err != nil {
			l.Err = fmt.Errorf("not a journal entry: %w", err)
		} else if dec.More() {
			l.Err = errors.New("not a journal entry: more than one JSON value on the line")
		} else {
			l.Err = l.Entry.Valid()
		}
		p.Lines = append(p.Lines, l)
	}
	return p
}

// Encode is the entry's line, newline included.
func Encode(e Entry) ([]byte, error) {
	if err := e.Valid(); err != nil {
		return nil, fmt.Errorf("journaling: %w", err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("journaling: %w", err)
	}
	return append(b, '\n'), nil
}

// File is the journal of one state directory.
type File struct {
	Path string
	Log  *slog.Logger
}

// In is the journal of the state directory dir.
func In(dir string, log *slog.Logger) *File {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &File{Path: filepath.Join(dir, FileName), Log: log}
}

// Append writes one entry, fsynced before it returns.
func (f *File) Append(e Entry) error {
	b, err := Encode(e)
	if err != nil {
		return err
	}
	if err := statefile.AppendLine(f.Path, Perm, b); err != nil {
		return fmt.Errorf("journaling a %s event: %w", e.Kind, err)
	}
	return nil
}

// Read returns the journal as it is now (under its lock).
func (f *File) Read() (Parsed, error) {
	b, err := statefile.ReadLocked(f.Path, Perm)
	if err != nil {
		return Parsed{}, fmt.Errorf("reading the event journal: %w", err)
	}
	return Parse(b), nil
}

// Replay sends the journal's entries in order through send, stopping at
// the first it cannot send; the entries sent and the corrupt lines before
// the stop leave the journal, everything else stays. When another process
// is replaying, it returns at once with nothing sent.
func (f *File) Replay(ctx context.Context, send func(context.Context, Entry) error) (sent int, err error) {
	unlock, ok, err := statefile.TryLock(f.Path+".replay", Perm)
	if err != nil {
		return 0, fmt.Errorf("replaying the event journal: %w", err)
	}
	if !ok {
		return 0, nil
	}
	defer unlock()
	data, err := statefile.ReadLocked(f.Path, Perm)
	if err != nil {
		return 0, fmt.Errorf("replaying the event journal: %w", err)
	}
	p := Parse(data)
	var corrupt [][]byte
	done := 0 // leading lines sent or set aside
	var sendErr error
	for i, l := range p.Lines {
		if l.Err != nil {
			f.Log.Warn("moving a corrupt journal line aside", "file", f.Path+".corrupt", "err", l.Err)
			corrupt = append(corrupt, l.Raw)
			done = i + 1
			continue
		}
		if sendErr = send(ctx, l.Entry); sendErr != nil {
			break
		}
		sent++
		done = i + 1
	}
	if done == 0 {
		return 0, nil
	}
	for _, c := range corrupt {
		if err := statefile.AppendLine(f.Path+".corrupt", Perm, append(bytes.Clone(c), '\n')); err != nil {
			return sent, fmt.Errorf("setting a corrupt journal line aside: %w", err)
		}
	}
	// the lines handled are a prefix of what was read: the file only grows
	// at its end between two replays, and replays take turns
	err = statefile.Update(f.Path, Perm, func(old []byte) ([]byte, bool, error) {
		cut := prefixEnd(old, p.Lines[:done])
		if cut < 0 {
			return nil, false, errors.New("the journal changed under the replay (was it edited by hand?)")
		}
		return bytes.Clone(old[cut:]), true, nil
	})
	if err != nil {
		return sent, fmt.Errorf("rewriting the event journal: %w", err)
	}
	return sent, nil
}

// prefixEnd returns where the given lines end in data (skipping the empty
// lines Parse skipped), or -1 when data does not start with them.
func prefixEnd(data []byte, lines []Line) int {
	pos := 0
	for _, l := range lines {
		for pos < len(data) {
			j := bytes.IndexByte(data[pos:], '\n')
			if j < 0 || len(bytes.TrimSpace(data[pos:pos+j])) != 0 {
				break
			}
			pos += j + 1
		}
		end := pos + len(l.Raw)
		if end >= len(data) || !bytes.Equal(data[pos:end], l.Raw) || data[end] != '\n' {
			return -1
		}
		pos = end + 1
	}
	return pos
}

// Spend sums what the journal's not yet replayed launches and
// terminations of account cost by now (USD, at the launch's price, from
// the launch time: an upper bound, as EC2 bills from running), and the
// per-job part. The local spend path adds it to the state database's.
func Spend(entries []Entry, account string, now time.Time, from time.Time) (total float64, jobs map[string]float64) {
	jobs = map[string]float64{}
	type iv struct {
		start, end time.Time
		price      float64
		job        string
	}
	ivs := map[string]*iv{}
	var order []string
	for _, e := range entries {
		switch e.Kind {
		case KindLaunch:
			ev := e.Event
			acct := ev.Account
			job := ""
			if ev.Job != nil {
				job = ev.Job.JobID
				if acct == "" {
					acct = ev.Job.Account
				}
			}
			if acct != account {
				continue
			}
			if _, ok := ivs[ev.InstanceID]; !ok {
				order = append(order, ev.InstanceID)
				ivs[ev.InstanceID] = &iv{start: ev.Time, price: ev.PriceUSD, job: job}
			}
		case KindTerminate:
			if v, ok := ivs[e.Event.InstanceID]; ok && v.end.IsZero() {
				v.end = e.Event.Time
			}
		}
	}
	for _, id := range order {
		v := ivs[id]
		s, end := v.start, v.end
		if end.IsZero() || end.After(now) {
			end = now
		}
		if s.Before(from) {
			s = from
		}
		if !end.After(s) {
			continue
		}
		secs := max(end.Sub(s).Seconds(), 60)
		c := secs / 3600 * v.price
		total += c
		if v.job != "" {
			jobs[v.job] += c
		}
	}
	return total, jobs
}
