package interruption

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

// NotePrefix starts every Note in a job's AdminComment.
const NotePrefix = "burst-requeue "

// Note is what burst writes into a job's AdminComment right before it
// requeues the job because a node of its allocation is being taken back:
//
//	burst-requeue lost=a10g-2 instance=i-0abc run=2026-12-01T11:32:06Z restart=0 by=agent: spot interruption (terminate)
//
// burst-suspend's epilog reads it at the end of that run to hold the job's
// other nodes for its relaunch (internal/lifecycle), and marks it used
// (Consumed: "burst-requeued ...", which ParseNote does not take), so the
// later, normal end of the relaunched run is not taken for the requeue.
// The restart count names the run (Slurm counts the requeue before the
// epilog runs; a job's start time at that epilog is the requeue's, not the
// run's). Admins see it in squeue, scontrol show job and sacct.
type Note struct {
	Lost     []string  // nodes being lost, sorted
	Instance string    // the instance behind the first of them; "" unknown
	Run      time.Time // StartTime of the run that was requeued (whole seconds, UTC)
	Restart  uint32    // its restart count
	By       string    // who requeued it: agent or sizer
	Why      string    // in words
}

var (
	noteRe     = regexp.MustCompile(`^burst-requeue lost=(\S+) instance=(\S+) run=(\S+) restart=(\d{1,9}) by=(agent|sizer): (.{0,200})$`)
	nodeNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	instanceRe = regexp.MustCompile(`^i-[0-9a-f]{1,17}$`)
)

// String renders the note (at most slurm.MaxAdminComment bytes: a long list
// of lost nodes is cut, which only makes the epilog release those nodes).
func (n Note) String() string {
	inst := n.Instance
	if inst == "" {
		inst = "-"
	}
	why := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, n.Why)
	if len(why) > 200 {
		why = why[:200]
	}
	lost := slices.Clone(n.Lost)
	slices.Sort(lost)
	ls := strings.Join(slices.Compact(lost), ",")
	for len(ls) > 600 {
		i := strings.LastIndexByte(ls, ',')
		if i < 0 {
			break
		}
		ls = ls[:i]
	}
	return fmt.Sprintf("%slost=%s instance=%s run=%s restart=%d by=%s: %s", NotePrefix, ls, inst,
		n.Run.UTC().Truncate(time.Second).Format(time.RFC3339), n.Restart, n.By, why)
}

// ParseNote reads a Note from an AdminComment; ok=false when it holds none
// (or anything malformed: the comment is operator-written text, never
// trusted beyond its exact form).
func ParseNote(s string) (Note, bool) {
	if len(s) > slurm.MaxAdminComment || !strings.HasPrefix(s, NotePrefix) {
		return Note{}, false
	}
	m := noteRe.FindStringSubmatch(s)
	if m == nil {
		return Note{}, false
	}
	var n Note
	for _, l := range strings.Split(m[1], ",") {
		if !nodeNameRe.MatchString(l) {
			return Note{}, false
		}
		n.Lost = append(n.Lost, l)
	}
	if m[2] != "-" {
		if !instanceRe.MatchString(m[2]) {
			return Note{}, false
		}
		n.Instance = m[2]
	}
	t, err := time.Parse(time.RFC3339, m[3])
	if err != nil {
		return Note{}, false
	}
	n.Run = t.UTC()
	r, err := strconv.ParseUint(m[4], 10, 32)
	if err != nil {
		return Note{}, false
	}
	n.Restart, n.By, n.Why = uint32(r), m[5], m[6]
	return n, true
}

// Ends reports whether j, as Slurm shows it in its EpilogSlurmctld, is the
// end of the run this note requeued: a restart count one higher (Slurm
// counts the requeue before the epilog runs). The epilog consumes the note
// (Consumed), so the end of the relaunched run, with the same count, is
// not taken for it.
func (n Note) Ends(j slurm.Job) bool { return j.RestartCount == n.Restart+1 }

// ConsumedPrefix starts a note the epilog has used.
const ConsumedPrefix = "burst-requeued "

// Consumed is the note once the epilog held nodes for the relaunch (or
// decided not to): what the admin reads afterwards; ParseNote refuses it.
func (n Note) Consumed(held []string) string {
	s := ConsumedPrefix + strings.TrimPrefix(n.String(), NotePrefix)
	if len(held) > 0 {
		s += "; held " + strings.Join(held, ",") + " for the relaunch"
	}
	if len(s) > slurm.MaxAdminComment {
		s = s[:slurm.MaxAdminComment]
	}
	return s
}

// IsLost reports whether the note names node as lost.
func (n Note) IsLost(node string) bool { return slices.Contains(n.Lost, node) }

// merge returns the note for this run with node added, keeping the nodes
// an earlier note of the same run named (two nodes of one job interrupted
// together).
func mergeNote(existing string, n Note) Note {
	if old, ok := ParseNote(existing); ok && old.Run.Equal(n.Run) && old.Restart == n.Restart {
		for _, l := range old.Lost {
			if !slices.Contains(n.Lost, l) {
				n.Lost = append(n.Lost, l)
			}
		}
	}
	slices.Sort(n.Lost)
	return n
}
