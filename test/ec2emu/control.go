package ec2emu

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ControlPrefix is the URL prefix of the emulator's control API, served on
// the same listener as the EC2 and SQS APIs:
//
//	GET  /_emu/instances                 instances as JSON (starts their IMDS; IMDSURL set)
//	GET  /_emu/calls                     recorded calls as JSON
//	GET  /_emu/bill                      the billing record ([]BillLine) as JSON
//	GET  /_emu/events                    emitted EventBridge events ([]EventRecord)
//	GET  /_emu/identity-cert?kind=rsa2048|signature   the identity certificate (PEM)
//	POST /_emu/interrupt?id=i-...        spot interruption notice
//	POST /_emu/rebalance?id=i-...        rebalance recommendation
//	POST /_emu/shutdown?id=i-...         the instance's OS powers off (InstanceInitiatedShutdownBehavior)
//	POST /_emu/capacity?type=&zone=&capacity=spot&n=0   set a pool's capacity (n<0: unlimited)
//	POST /_emu/tokens?n=0                set the launch token bucket
//	POST /_emu/launch-indexes?mode=per-pool   LaunchIndexMode of later fleets
//	POST /_emu/fault                     JSON Fault (For and Delay as Go duration strings, e.g. "30s")
//	POST /_emu/short-fleets?n=1&missing=1   the next n multi-instance fleets launch missing fewer
//	POST /_emu/describe-lag?instances=5s&tags=10s   new instances (their tags) absent from DescribeInstances
//	POST /_emu/crash?id=i-...            the instance's host fails (Server.InternalError)
//	POST /_emu/schedule-event?id=&code=&in=  a scheduled event (scheduled.go), NotBefore in= from now
//	POST /_emu/event-rule                JSON EventRule (Delay as a Go duration string)
//	POST /_emu/event-rule/remove?name=   remove a rule
//	POST /_emu/capacity-block            JSON {InstanceType, Zone, Count, StartIn, EndIn (Go durations from now), UpfrontUSD}: a Capacity Block; answers {"CapacityReservationId": "cr-..."}
const ControlPrefix = "/_emu/"

func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, format string, a ...any) {
		http.Error(w, fmt.Sprintf(format, a...), status)
	}
	q := r.URL.Query()
	writeJSON := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
	}
	op := strings.TrimPrefix(r.URL.Path, ControlPrefix)
	if r.Method == http.MethodGet {
		switch op {
		case "instances":
			var out []Instance
			for _, in := range s.Instances() {
				if in.State == "pending" || in.State == "running" {
					if u, err := s.IMDSURL(in.ID); err == nil {
						in.IMDSURL = u
					}
				}
				out = append(out, in)
			}
			writeJSON(out)
		case "calls":
			writeJSON(s.Calls())
		case "bill":
			writeJSON(s.Bill())
		case "events":
			writeJSON(s.Events())
		case "identity-cert":
			kind := q.Get("kind")
			if kind == "" {
				kind = IdentityRSA2048
			}
			b, err := s.IdentityCertPEMFor(kind)
			if err != nil {
				fail(400, "%v", err)
				return
			}
			w.Header().Set("Content-Type", "application/x-pem-file")
			_, _ = w.Write(b)
		default:
			fail(404, "unknown control endpoint %s", r.URL.Path)
		}
		return
	}
	if r.Method != http.MethodPost {
		fail(405, "use GET or POST")
		return
	}
	if op == "capacity-block" {
		id, err := s.controlCapacityBlock(r)
		if err != nil {
			fail(400, "%s: %v", op, err)
			return
		}
		writeJSON(map[string]string{"CapacityReservationId": id})
		return
	}
	var err error
	switch op {
	case "interrupt":
		err = s.Interrupt(q.Get("id"))
	case "rebalance":
		err = s.Rebalance(q.Get("id"))
	case "schedule-event":
		// ?id=&code=instance-retirement&in=10m (NotBefore from now)
		var in time.Duration
		if in, err = time.ParseDuration(q.Get("in")); err == nil {
			var evID string
			if evID, err = s.ScheduleEvent(q.Get("id"), q.Get("code"), s.Now().Add(in)); err == nil {
				writeJSON(map[string]string{"event_id": evID})
				return
			}
		}
	case "shutdown":
		err = s.Shutdown(q.Get("id"))
	case "capacity":
		var n int
		if n, err = strconv.Atoi(q.Get("n")); err == nil {
			if q.Get("type") == "" || q.Get("zone") == "" || (q.Get("capacity") != "spot" && q.Get("capacity") != "on-demand") {
				err = fmt.Errorf("want type, zone and capacity=spot|on-demand")
			} else {
				s.SetCapacity(q.Get("type"), q.Get("zone"), q.Get("capacity"), n)
			}
		}
	case "tokens":
		var n float64
		if n, err = strconv.ParseFloat(q.Get("n"), 64); err == nil {
			s.SetTokens(n)
		}
	case "launch-indexes":
		err = s.SetLaunchIndexes(LaunchIndexMode(q.Get("mode")))
	case "fault":
		var f struct {
			Fault
			For   string
			Delay string
		}
		if err = decodeStrict(r, &f); err == nil {
			if f.For != "" {
				f.Fault.For, err = time.ParseDuration(f.For)
			}
			if err == nil && f.Delay != "" {
				f.Fault.Delay, err = time.ParseDuration(f.Delay)
			}
			if err == nil && f.Code == "" && f.Fault.Delay <= 0 {
				err = fmt.Errorf("a fault needs a Code or a Delay")
			}
			if err == nil && f.Service != "" && f.Service != "ec2" && f.Service != "sqs" {
				err = fmt.Errorf("fault Service %q: want ec2 or sqs", f.Service)
			}
			if err == nil {
				s.InjectFault(f.Fault)
			}
		}
	case "event-rule":
		var er struct {
			EventRule
			Delay string
		}
		if err = decodeStrict(r, &er); err == nil {
			if er.Delay != "" {
				er.EventRule.Delay, err = time.ParseDuration(er.Delay)
			}
			if err == nil {
				_, err = s.AddEventRule(er.EventRule)
			}
		}
	case "short-fleets":
		var n, missing int
		if n, err = strconv.Atoi(q.Get("n")); err == nil {
			if missing, err = strconv.Atoi(q.Get("missing")); err == nil {
				err = s.ShortFleets(n, missing)
			}
		}
	case "describe-lag":
		var in, tags time.Duration
		if in, err = parseDurationOr0(q.Get("instances")); err == nil {
			if tags, err = parseDurationOr0(q.Get("tags")); err == nil {
				err = s.SetDescribeLag(in, tags)
			}
		}
	case "crash":
		err = s.Crash(q.Get("id"))
	case "event-rule/remove":
		err = s.RemoveEventRule(q.Get("name"))
	default:
		fail(404, "unknown control endpoint %s", r.URL.Path)
		return
	}
	if err != nil {
		fail(400, "%s: %v", op, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func parseDurationOr0(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	return time.ParseDuration(v)
}

func decodeStrict(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// RemoveEventRule removes the rule of that name.
func (s *Server) RemoveEventRule(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.rules {
		if r.Name == name {
			s.rules = append(s.rules[:i], s.rules[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("no event rule %q", name)
}
