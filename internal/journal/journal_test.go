package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

func launch(id string, at time.Time) Entry {
	return Entry{Kind: KindLaunch, Event: &sizerapi.InstanceEvent{InstanceID: id, InstanceType: "g6.xlarge", Account: "nlp", PriceUSD: 3.6, Time: at}}
}

func ids(es []Entry) []string {
	var out []string
	for _, e := range es {
		switch {
		case e.Event != nil:
			out = append(out, e.Kind+":"+e.Event.InstanceID)
		case e.Intent != nil:
			out = append(out, e.Kind+":"+e.Intent.ClientToken)
		case e.Run != nil:
			out = append(out, e.Kind+":"+e.Run.JobID)
		}
	}
	return out
}

// TestCutShortAndCorrupt: a journal whose last write a crash cut short, with
// a corrupt line in the middle, loses no complete entry: the replay sends
// every entry, sets the corrupt line aside, leaves the cut line alone, and
// an append after the cut starts a line of its own.
func TestCutShortAndCorrupt(t *testing.T) {
	dir := t.TempDir()
	f := In(dir, nil)
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for _, e := range []Entry{launch("i-1", t0), launch("i-2", t0)} {
		if err := f.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	whole, _ := Encode(launch("i-3", t0))
	raw, _ := os.ReadFile(f.Path)
	// a corrupt line between i-1 and i-2, then i-3 cut short
	lines := strings.SplitAfter(string(raw), "\n")
	raw = []byte(lines[0] + "{\"kind\":\"launch\",\"event\":{\"instance_id\":\n" + lines[1] + string(whole[:len(whole)/2]))
	if err := os.WriteFile(f.Path, raw, Perm); err != nil {
		t.Fatal(err)
	}
	p, err := f.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids(p.Entries()), ","); got != "launch:i-1,launch:i-2" || len(p.Lines) != 3 || p.Lines[1].Err == nil || len(p.Tail) == 0 {
		t.Fatalf("parsed %s, %d lines, tail %q", got, len(p.Lines), p.Tail)
	}
	// the next append keeps the cut line separate and itself whole
	if err := f.Append(launch("i-4", t0)); err != nil {
		t.Fatal(err)
	}
	var sent []string
	n, err := f.Replay(context.Background(), func(_ context.Context, e Entry) error {
		sent = append(sent, e.Event.InstanceID)
		return nil
	})
	if err != nil || n != 3 || strings.Join(sent, ",") != "i-1,i-2,i-4" {
		t.Fatalf("replay sent %d %v, err %v", n, sent, err)
	}
	left, _ := os.ReadFile(f.Path)
	aside, _ := os.ReadFile(f.Path + ".corrupt")
	if len(left) != 0 || strings.Count(string(aside), "\n") != 2 || !strings.Contains(string(aside), `{"kind":"launch","event":{"instance_id":`) {
		t.Fatalf("journal left %q, set aside %q", left, aside)
	}
	if fi, err := os.Stat(f.Path); err != nil || fi.Mode().Perm() != Perm {
		t.Fatalf("journal mode %v %v", fi, err)
	}
}

// TestReplayStopsAndRewritesOnlyWhenSent: nothing sent, no rewrite (the
// file is the same inode); a refusal keeps that entry and what follows.
func TestReplayStopsAndRewritesOnlyWhenSent(t *testing.T) {
	f := In(t.TempDir(), nil)
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for i := 1; i <= 3; i++ {
		if err := f.Append(launch(fmt.Sprintf("i-%d", i), t0)); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := os.Stat(f.Path)
	refuse := errors.New("sizer down")
	if n, err := f.Replay(context.Background(), func(context.Context, Entry) error { return refuse }); n != 0 || err != nil {
		t.Fatalf("refused replay: %d %v", n, err)
	}
	after, _ := os.Stat(f.Path)
	if !os.SameFile(before, after) {
		t.Fatal("a replay that sent nothing rewrote the journal")
	}
	calls := 0
	n, err := f.Replay(context.Background(), func(context.Context, Entry) error {
		calls++
		if calls == 2 {
			return refuse
		}
		return nil
	})
	if n != 1 || err != nil {
		t.Fatalf("partial replay: %d %v", n, err)
	}
	p, _ := f.Read()
	if got := strings.Join(ids(p.Entries()), ","); got != "launch:i-2,launch:i-3" {
		t.Fatalf("left %s", got)
	}
}

// TestTwoAppendersWhileReplaying runs two real processes (this test binary
// again) appending 150 entries each while this process replays again and
// again through a sender that refuses some: every entry reaches the sender
// exactly once and in each writer's order, and the journal ends empty.
func TestTwoAppendersWhileReplaying(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	const per = 150
	var cmds []*exec.Cmd
	for w := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAppender$")
		cmd.Env = append(os.Environ(), "BURST_JOURNAL_APPENDER="+dir, fmt.Sprintf("BURST_JOURNAL_WRITER=%d", w), fmt.Sprintf("BURST_JOURNAL_N=%d", per))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var mu sync.Mutex
	got := map[string]int{}
	var order [2][]int
	k := 0
	send := func(_ context.Context, e Entry) error {
		mu.Lock()
		defer mu.Unlock()
		k++
		if k%7 == 0 {
			return errors.New("refused") // a flaky sizer
		}
		id := e.Event.InstanceID
		got[id]++
		var w, i int
		fmt.Sscanf(id, "w%d-%d", &w, &i)
		order[w] = append(order[w], i)
		return nil
	}
	f := In(dir, nil)
	done := make(chan error, 2)
	for _, c := range cmds {
		go func() { done <- c.Wait() }()
	}
	finished := 0
	for finished < 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("appender: %v", err)
			}
			finished++
		default:
		}
		if _, err := f.Replay(context.Background(), send); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		p, err := f.Read()
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Lines) == 0 {
			break
		}
		if _, err := f.Replay(context.Background(), send); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2*per {
		t.Fatalf("sender got %d distinct entries, want %d", len(got), 2*per)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s sent %d times", id, n)
		}
	}
	for w := range 2 {
		for i, v := range order[w] {
			if v != i {
				t.Fatalf("writer %d's entries out of order: %v", w, order[w])
			}
		}
	}
	if b, _ := os.ReadFile(f.Path); len(b) != 0 {
		t.Fatalf("journal not empty: %q", b)
	}
}

// TestHelperAppender is the appender process of TestTwoAppendersWhileReplaying.
func TestHelperAppender(t *testing.T) {
	dir := os.Getenv("BURST_JOURNAL_APPENDER")
	if dir == "" {
		t.Skip("helper process")
	}
	w, _ := strconv.Atoi(os.Getenv("BURST_JOURNAL_WRITER"))
	n, _ := strconv.Atoi(os.Getenv("BURST_JOURNAL_N"))
	f := In(dir, nil)
	for i := range n {
		if err := f.Append(launch(fmt.Sprintf("w%d-%d", w, i), time.Now())); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSpend(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	es := []Entry{
		{Kind: KindLaunch, Event: &sizerapi.InstanceEvent{InstanceID: "a", InstanceType: "x", Account: "nlp", PriceUSD: 3.6, Time: now.Add(-time.Hour), Job: &sizerapi.Job{JobID: "7"}}},
		{Kind: KindTerminate, Event: &sizerapi.InstanceEvent{InstanceID: "a", Time: now.Add(-30 * time.Minute)}},
		{Kind: KindLaunch, Event: &sizerapi.InstanceEvent{InstanceID: "b", InstanceType: "x", Account: "nlp", PriceUSD: 1, Time: now.Add(-10 * time.Second)}}, // 60 s minimum
		{Kind: KindLaunch, Event: &sizerapi.InstanceEvent{InstanceID: "c", InstanceType: "x", Account: "bio", PriceUSD: 100, Time: now.Add(-time.Hour)}},
	}
	total, jobs := Spend(es, "nlp", now, from)
	if want := 1.8 + 1.0/60; math.Abs(total-want) > 1e-9 || math.Abs(jobs["7"]-1.8) > 1e-9 {
		t.Fatalf("spend %.6f jobs %v, want %.6f", total, jobs, want)
	}
}

// FuzzParse: any journal content parses without panic, and an entry
// appended after it (as AppendLine does) comes back whole, after every
// complete entry that was there.
func FuzzParse(f *testing.F) {
	one, _ := Encode(launch("i-1", time.Unix(1_700_000_000, 0)))
	f.Add(one)
	f.Add(append(one, one[:20]...))
	f.Add([]byte("{\"kind\":\"run\"}\n\n{oops\n"))
	f.Add([]byte(`{"kind":"intent","intent":{"client_token":"t","nodes":["a-1"],"capacity":"spot","offerings":null,"time":"2026-01-01T00:00:00Z"}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := Parse(data)
		for _, l := range p.Lines {
			if l.Err == nil {
				b, err := Encode(l.Entry)
				if err != nil {
					t.Fatalf("a valid entry does not encode: %v", err)
				}
				if q := Parse(b); len(q.Lines) != 1 || q.Lines[0].Err != nil {
					t.Fatalf("re-encoded entry does not parse: %q", b)
				}
			}
		}
		path := filepath.Join(t.TempDir(), FileName)
		if err := os.WriteFile(path, data, Perm); err != nil {
			t.Fatal(err)
		}
		jf := &File{Path: path, Log: nil}
		jf.Log = In(filepath.Dir(path), nil).Log
		if err := jf.Append(launch("i-new", time.Unix(1_700_000_000, 0))); err != nil {
			t.Fatal(err)
		}
		after, err := jf.Read()
		if err != nil {
			t.Fatal(err)
		}
		before := p.Entries()
		es := after.Entries()
		if len(es) < len(before)+1 || len(after.Tail) != 0 {
			t.Fatalf("%d entries before, %d after the append (tail %q)", len(before), len(es), after.Tail)
		}
		last := es[len(es)-1]
		if last.Kind != KindLaunch || last.Event.InstanceID != "i-new" {
			t.Fatalf("the appended entry came back as %+v", last)
		}
		// every complete entry of before is still there, in order
		j := 0
		for _, e := range es {
			if j < len(before) && bytes.Equal(mustJSON(e), mustJSON(before[j])) {
				j++
			}
		}
		if j != len(before) {
			t.Fatalf("only %d of %d entries survived the append", j, len(before))
		}
	})
}

func mustJSON(e Entry) []byte {
	b, _ := Encode(e)
	return b
}
