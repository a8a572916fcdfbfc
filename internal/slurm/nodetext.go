package slurm

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// scontrolNodeKeys are the keys `scontrol show node -o -d` prints on 22.05
// (and later releases); a token "Key=" starts a new field only when Key is
// one of them, so free-text values (Reason, Comment, Extra, OS) may hold
// spaces and "x=y". Only administrators and slurmd set those values: job
// users cannot.
var scontrolNodeKeys = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`NodeName Arch CoresPerSocket CPUAlloc CPUEfctv CPUTot CPULoad CPUSpecList
		CoreSpecCount AvailableFeatures ActiveFeatures Gres GresDrain GresUsed NodeAddr NodeHostName Port Version OS
		RealMemory AllocMem FreeMem MemSpecLimit Sockets Boards State ThreadsPerCore TmpDisk Weight Owner MCS_label
		Partitions BootTime SlurmdStartTime LastBusyTime ResumeAfterTime CfgTRES AllocTRES CapWatts CurrentWatts
		AveWatts ExtSensorsJoules ExtSensorsWatts ExtSensorsTemp Reason Comment Extra NextState Reservation
		InstanceId InstanceType TopologyAddr TopologyHostName`) {
		scontrolNodeKeys[k] = true
	}
}

var keyToken = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_]*)=`)

// reasonSuffix is the " [user@time]" scontrol appends to a node's reason
// (JSON gives the reason alone).
var reasonSuffix = regexp.MustCompile(` \[[^\[\]@ ]*@[0-9T:-]+\]$`)

// ParseScontrolNodes parses `scontrol show node -o -d [NAMES]` (one line per
// node), what burst reads for named nodes on 22.05, whose sinfo --json
// ignores -n and which has no scontrol --json. Lines that are not node
// records ("Node x not found") are skipped. Times are read in the local
// time zone, as scontrol prints them.
func ParseScontrolNodes(b []byte) ([]Node, error) {
	if len(b) > MaxJSONSize {
		return nil, fmt.Errorf("parsing scontrol show node: %d bytes, more than the %d allowed", len(b), MaxJSONSize)
	}
	var nodes []Node
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r ")
		if !strings.HasPrefix(line, "NodeName=") {
			if line != "" && !(strings.HasPrefix(line, "Node ") && strings.HasSuffix(line, " not found")) {
				return nil, fmt.Errorf("parsing scontrol show node: line %d: %.60q is not a node record (NodeName=...)", i+1, line)
			}
			continue
		}
		kv, err := splitScontrolLine(line)
		if err != nil {
			return nil, fmt.Errorf("parsing scontrol show node: line %d: %w", i+1, err)
		}
		n, err := nodeFromText(kv)
		if err != nil {
			return nil, fmt.Errorf("parsing scontrol show node: line %d: %w", i+1, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// splitScontrolLine splits one -o line into its key=value fields. A token
// "Key=..." starts a field when Key is a known key not yet seen on the line.
func splitScontrolLine(line string) (map[string]string, error) {
	kv := map[string]string{}
	key := ""
	var val []string
	flush := func() {
		if key != "" {
			kv[key] = strings.TrimRight(strings.Join(val, " "), " ")
		}
	}
	for _, tok := range strings.Split(line, " ") {
		if m := keyToken.FindStringSubmatch(tok); m != nil && scontrolNodeKeys[m[1]] {
			if _, seen := kv[m[1]]; !seen && m[1] != key {
				flush()
				key, val = m[1], []string{tok[len(m[0]):]}
				continue
			}
		}
		if key == "" {
			return nil, fmt.Errorf("text %.40q before the first key", tok)
		}
		val = append(val, tok)
	}
	flush()
	return kv, nil
}

func nodeFromText(kv map[string]string) (Node, error) {
	n := Node{
		Name: kv["NodeName"], Addr: kv["NodeAddr"], Hostname: kv["NodeHostName"],
		Features: strList{kv["AvailableFeatures"]}.split(), ActiveFeatures: strList{kv["ActiveFeatures"]}.split(),
		GRESUsed: kv["GresUsed"], Comment: kv["Comment"], Extra: kv["Extra"],
		Partitions: strList{kv["Partitions"]}.split(), SlurmdVersion: kv["Version"],
		Reason:     reasonSuffix.ReplaceAllString(kv["Reason"], ""),
		InstanceID: kv["InstanceId"], InstanceType: kv["InstanceType"],
	}
	where := "node " + n.Name
	if n.Name == "" || strings.ContainsAny(n.Name, " \t") {
		return n, fmt.Errorf("NodeName %q: empty or has a space", n.Name)
	}
	st := strings.Split(kv["State"], "+")
	if len(st) == 0 || st[0] == "" {
		return n, fmt.Errorf("%s: no State", where)
	}
	st[0] = strings.TrimRight(st[0], "*~#!%$@^-") // suffixes some releases append to the base state
	var err error
	if n.State, n.Flags, err = nodeState(strList(st), nil); err != nil {
		return n, fmt.Errorf("%s: State: %w", where, err)
	}
	if v := kv["CPUTot"]; v != "" {
		c, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return n, fmt.Errorf("%s: CPUTot %q is not a count", where, v)
		}
		n.CPUs = uint32(c)
	}
	if v := kv["RealMemory"]; v != "" {
		m, err := strconv.ParseUint(v, 10, 63)
		if err != nil || m > math.MaxInt64 {
			return n, fmt.Errorf("%s: RealMemory %q is not a size in MiB", where, v)
		}
		n.RealMemoryMB = m
	}
	for _, f := range []struct {
		key string
		dst *time.Time
	}{{"BootTime", &n.BootTime}, {"SlurmdStartTime", &n.SlurmdStart}} {
		switch v := kv[f.key]; v {
		case "", "None", "Unknown":
		default:
			t, err := time.ParseInLocation("2006-01-02T15:04:05", v, time.Local)
			if err != nil {
				return n, fmt.Errorf("%s: %s %q: want YYYY-MM-DDTHH:MM:SS", where, f.key, v)
			}
			*f.dst = t
		}
	}
	if n.GRES, err = ParseGRES(kv["Gres"]); err != nil {
		return n, fmt.Errorf("%s: Gres: %w", where, err)
	}
	return n, nil
}
