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
// the same listener as the EC2 API:
//
//	GET  /_emu/instances                 instances as JSON (starts their IMDS; IMDSURL set)
//	GET  /_emu/calls                     recorded calls as JSON
//	POST /_emu/interrupt?id=i-...        spot interruption notice
//	POST /_emu/rebalance?id=i-...        rebalance recommendation
//	POST /_emu/capacity?type=&zone=&capacity=spot&n=0   set a pool's capacity (n<0: unlimited)
//	POST /_emu/tokens?n=0                set the launch token bucket
//	POST /_emu/fault                     JSON Fault (For as a Go duration string, e.g. "30s")
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
		default:
			fail(404, "unknown control endpoint %s", r.URL.Path)
		}
		return
	}
	if r.Method != http.MethodPost {
		fail(405, "use GET or POST")
		return
	}
	var err error
	switch op {
	case "interrupt":
		err = s.Interrupt(q.Get("id"))
	case "rebalance":
		err = s.Rebalance(q.Get("id"))
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
	case "fault":
		var f struct {
			Fault
			For string
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err = dec.Decode(&f); err == nil {
			if f.For != "" {
				f.Fault.For, err = time.ParseDuration(f.For)
			}
			if err == nil && f.Code == "" {
				err = fmt.Errorf("a fault needs a Code")
			}
			if err == nil {
				s.InjectFault(f.Fault)
			}
		}
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
