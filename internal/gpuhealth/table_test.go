package gpuhealth

import "testing"

func TestClassifyDefaults(t *testing.T) {
	tb := NewTable(Overrides{})
	for _, tc := range []struct {
		ev   Event
		want Action
	}{
		{Event{Kind: KindXid, Xid: 13}, Note},
		{Event{Kind: KindXid, Xid: 31}, Note},
		{Event{Kind: KindXid, Xid: 43}, Note},
		{Event{Kind: KindXid, Xid: 48}, Replace},
		{Event{Kind: KindXid, Xid: 63}, Replace},
		{Event{Kind: KindXid, Xid: 64}, Replace},
		{Event{Kind: KindXid, Xid: 74}, Replace},
		{Event{Kind: KindXid, Xid: 79}, Replace},
		{Event{Kind: KindXid, Xid: 94}, Replace},
		{Event{Kind: KindXid, Xid: 95}, Replace},
		{Event{Kind: KindXid, Xid: 119}, Replace},
		{Event{Kind: KindXid, Xid: 120}, Replace},
		{Event{Kind: KindXid, Xid: 999}, Note}, // not in the table
		{Event{Kind: KindECCVolatile, Count: 1}, Replace},
		{Event{Kind: KindECCAggregate, Count: 1}, Note},
		{Event{Kind: KindRowRemapFailed}, Replace},
		{Event{Kind: KindRowRemapPending}, Replace},
		{Event{Kind: KindRetiredPagesPending}, Replace},
		{Event{Kind: KindNVLink, Count: 500}, Replace},
		{Event{Kind: KindLost}, Replace},
		{Event{Kind: KindSlowdown}, Replace},
		{Event{Kind: KindCount, GPU: -1}, Replace},
		{Event{Kind: KindModel}, Replace},
	} {
		if got, why := tb.Classify(tc.ev); got != tc.want || why == "" {
			t.Errorf("%s: got %s (%q), want %s", tc.ev.What(), got, why, tc.want)
		}
	}
}

func TestClassifyOverrides(t *testing.T) {
	tb := NewTable(Overrides{Xid: map[uint64]Action{13: Replace, 79: Ignore}, Kinds: map[Kind]Action{KindSlowdown: Note}})
	for _, tc := range []struct {
		ev   Event
		want Action
	}{
		{Event{Kind: KindXid, Xid: 13}, Replace},
		{Event{Kind: KindXid, Xid: 79}, Ignore},
		{Event{Kind: KindXid, Xid: 48}, Replace}, // untouched default
		{Event{Kind: KindSlowdown}, Note},
		{Event{Kind: KindLost}, Replace},
	} {
		got, why := tb.Classify(tc.ev)
		if got != tc.want {
			t.Errorf("%s: got %s (%s), want %s", tc.ev.What(), got, why, tc.want)
		}
	}
	if _, why := tb.Classify(Event{Kind: KindXid, Xid: 13}); why != "operator override (gpu_health.xid)" {
		t.Errorf("override reason %q", why)
	}
}

func TestEveryKindHasADefault(t *testing.T) {
	for _, k := range Kinds {
		if k == KindXid {
			continue
		}
		if _, ok := KindTable[k]; !ok {
			t.Errorf("kind %s has no default action", k)
		}
		if got, err := ParseKind(string(k)); err != nil || got != k {
			t.Errorf("ParseKind(%s) = %s, %v", k, got, err)
		}
	}
	if _, err := ParseKind("xid"); err == nil {
		t.Error("ParseKind(xid) accepted")
	}
}

func TestParse(t *testing.T) {
	for _, s := range []string{"0", "-1", "1000", "x", "79.5", ""} {
		if _, err := ParseXid(s); err == nil {
			t.Errorf("ParseXid(%q) accepted", s)
		}
	}
	if x, err := ParseXid("79"); err != nil || x != 79 {
		t.Errorf("ParseXid(79) = %d, %v", x, err)
	}
	if _, err := ParseAction("drain"); err == nil {
		t.Error("ParseAction(drain) accepted")
	}
}

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		ev   Event
		want string
	}{
		{Event{Kind: KindXid, Xid: 79, GPU: 3, BusID: "0000:b3:00.0"}, "gpu: Xid 79 on GPU 3 (0000:b3:00.0)"},
		{Event{Kind: KindLost, GPU: 0}, "gpu: gpu_lost on GPU 0"},
		{Event{Kind: KindCount, GPU: -1, Detail: "7 GPUs, the class has 8"}, "gpu: gpu_count (7 GPUs, the class has 8)"},
	} {
		if got := tc.ev.Reason(); got != tc.want {
			t.Errorf("Reason() = %q, want %q", got, tc.want)
		}
	}
	long := Event{Kind: KindModel, GPU: -1, Detail: string(make([]byte, 200))}
	if n := len(long.Reason()); n > 120 {
		t.Errorf("reason of %d characters", n)
	}
}

func TestParseOverrides(t *testing.T) {
	o, errs := ParseOverrides(map[string]string{"13": "replace", "79": "ignore"}, map[string]string{"clock_slowdown": "note"})
	if len(errs) != 0 || o.Xid[13] != Replace || o.Xid[79] != Ignore || o.Kinds[KindSlowdown] != Note {
		t.Fatalf("%+v %v", o, errs)
	}
	_, errs = ParseOverrides(map[string]string{"abc": "replace", "48": "drain", "1000": "note"}, map[string]string{"melted": "note", "gpu_lost": "maybe"})
	want := []string{"xid.1000: \"1000\" is not an Xid code", "xid.48: unknown action \"drain\"", "xid.abc: \"abc\" is not an Xid code", "events.gpu_lost: unknown action \"maybe\"", "events.melted: unknown GPU health event"}
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want %d", errs, len(want))
	}
	for i, w := range want {
		if got := errs[i].Error(); len(got) < len(w) || got[:len(w)] != w {
			t.Errorf("error %d: %q, want it to start %q", i, got, w)
		}
	}
}
