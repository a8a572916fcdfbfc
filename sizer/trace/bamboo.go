package trace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// SpotEvent is one line of a measured spot fleet trace from
// uclasystem/bamboo (NSDI'23, MIT licence), traces/*.csv:
// `milliseconds,add|remove,node` with no header.
type SpotEvent struct {
	At     time.Duration // since the trace start
	Remove bool          // false: node added
	Node   string
}

// ReadBamboo parses a bamboo spot trace. Lines must be in time order.
func ReadBamboo(r io.Reader) ([]SpotEvent, error) {
	sc := bufio.NewScanner(r)
	var out []SpotEvent
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		f := strings.Split(s, ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("reading bamboo trace: %w", badRow(line, "has %d fields, want milliseconds,add|remove,node", len(f)))
		}
		ms, err := strconv.ParseInt(strings.TrimSpace(f[0]), 10, 64)
		if err != nil || ms < 0 || ms > int64(1<<62)/int64(time.Millisecond) {
			return nil, fmt.Errorf("reading bamboo trace: %w", badRow(line, "milliseconds %q is not a whole number >= 0", f[0]))
		}
		ev := SpotEvent{At: time.Duration(ms) * time.Millisecond, Node: strings.TrimSpace(f[2])}
		switch strings.TrimSpace(f[1]) {
		case "add":
		case "remove":
			ev.Remove = true
		default:
			return nil, fmt.Errorf("reading bamboo trace: %w", badRow(line, "event %q is not add or remove", f[1]))
		}
		if len(out) > 0 && ev.At < out[len(out)-1].At {
			return nil, fmt.Errorf("reading bamboo trace: %w", badRow(line, "time %d ms is before the previous line's; the trace must be in time order", ms))
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading bamboo trace: %w", err)
	}
	return out, nil
}

// RemovalRate is the trace's removals per node-hour: removals divided by
// the integral of the live node count over the trace's span.
func RemovalRate(evs []SpotEvent) (perNodeHour float64, err error) {
	live := 0
	var nodeSec float64
	removals := 0
	for i, e := range evs {
		if i > 0 {
			nodeSec += float64(live) * (e.At - evs[i-1].At).Seconds()
		}
		if e.Remove {
			removals++
			if live > 0 {
				live--
			}
		} else {
			live++
		}
	}
	if nodeSec <= 0 {
		return 0, fmt.Errorf("computing removal rate: the trace covers no node-time (%d events)", len(evs))
	}
	return float64(removals) / (nodeSec / 3600), nil
}
