package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/store"
)

func (s *Server) rank(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var rq sizerapi.RankRequest
	if err := decode(r, &rq); err != nil {
		return nil, err
	}
	if err := rq.Job.Validate("job"); err != nil {
		return nil, badRequest("%v", err)
	}
	if rq.EstHours < 0 || rq.EstHours > sizerapi.MaxTimeLimitSeconds/3600 || rq.EstHours != rq.EstHours {
		return nil, badRequest("est_hours: %v is out of range: want 0 to %d", rq.EstHours, sizerapi.MaxTimeLimitSeconds/3600)
	}
	req, _ := rq.Job.Policy() // metadata problems were reported at submission; rank with what parses
	in := sizing.RankInput{Class: rq.Class, Request: req, Zones: rq.Zones, EstHours: rq.EstHours}
	if len(in.Zones) == 0 {
		in.Zones = s.o.Zones
	}
	for _, u := range rq.Unavailable {
		in.Unavailable = append(in.Unavailable, sizing.Unavailable{InstanceType: u.InstanceType, Zone: u.Zone, Capacity: capacity.Type(u.Capacity), Reason: u.Reason})
	}
	now := s.now()
	recent, err := s.st.Interruptions(r.Context(), now.Add(-s.o.AvoidFor))
	if err != nil {
		return nil, err
	}
	var resp sizerapi.RankResponse
	seen := map[[2]string]bool{}
	for _, it := range recent {
		k := [2]string{it.InstanceType, it.Zone}
		if it.InstanceType == "" || seen[k] {
			continue
		}
		seen[k] = true
		reason := fmt.Sprintf("spot %s interrupted at %s", it.InstanceID, it.Time.UTC().Format(time.RFC3339))
		in.Unavailable = append(in.Unavailable, sizing.Unavailable{InstanceType: it.InstanceType, Zone: it.Zone, Capacity: capacity.Spot, Reason: reason})
		resp.Avoided = append(resp.Avoided, sizerapi.Unavailable{InstanceType: it.InstanceType, Zone: it.Zone, Capacity: string(capacity.Spot), Reason: reason})
	}
	if in.Budget, err = AccountBudget(r.Context(), s.months, s.o.Budgets, s.o.IdleOwner, req.Account, now); err != nil {
		return nil, err
	}
	offers, err := s.pol.Rank(in)
	if err != nil {
		_, code := errCode(err)
		s.decisions.WithLabelValues("rank", code).Inc()
		return nil, err
	}
	s.decisions.WithLabelValues("rank", "ok").Inc()
	resp.Offerings = offers
	if rq.Job.JobID != "" && len(offers) > 0 {
		// the dashboard shows the decision and its reason per job
		b := offers[0]
		d := sizerapi.JobDecision{JobID: rq.Job.JobID, Time: now, Class: rq.Class, InstanceType: b.InstanceType, Zone: b.Zone, Capacity: string(b.Capacity),
			PriceUSD: b.PriceUSD, ExpectedUSD: b.ExpectedUSD, Reason: b.Reason, Offerings: len(offers), Avoided: len(resp.Avoided), Comment: truncate(rq.Job.Comment, 1000)}
		if err := s.st.RecordDecision(context.WithoutCancel(r.Context()), d); err != nil {
			s.log.Warn("recording the decision", "job", rq.Job.JobID, "err", err)
		}
	}
	return resp, nil
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	var rq sizerapi.RouteRequest
	if err := decode(r, &rq); err != nil {
		return nil, err
	}
	if err := rq.Job.Validate("job"); err != nil {
		return nil, badRequest("%v", err)
	}
	user, err := s.routeUser(r.Context(), r, p, rq.Job.User)
	if err != nil {
		s.decisions.WithLabelValues("route", "unauthenticated").Inc()
		return nil, err
	}
	rq.Job.User = user
	d, err := Decide(r.Context(), s.pol, s.st, s.months, s.o.Budgets, s.o.IdleOwner, rq.Job, s.now(), s.o.HistoryJobs)
	if err != nil {
		_, code := errCode(err)
		s.decisions.WithLabelValues("route", code).Inc()
		return nil, err
	}
	outcome := "ok"
	if d.Refused {
		outcome = "refused"
	} else if d.Downsized {
		outcome = "downsized"
	} else if d.Upsized {
		outcome = "upsized"
	}
	s.decisions.WithLabelValues("route", outcome).Inc()
	return d, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// MaxRecords bounds one report batch.
const MaxRecords = 10000

func (s *Server) reports(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	var b sizerapi.ReportBatch
	if err := decode(r, &b); err != nil {
		return nil, err
	}
	if p.Node != "" {
		// a node reports for itself only: its own node and instance
		if b.Node == "" {
			b.Node = p.Node
		}
		if b.Node != p.Node {
			return nil, forbidden("credential of node %s may not report for node %s", p.Node, b.Node)
		}
		if b.InstanceID != "" && b.InstanceID != p.InstanceID {
			return nil, forbidden("credential of instance %s may not report for instance %s", p.InstanceID, b.InstanceID)
		}
		b.InstanceID = p.InstanceID
		if len(b.Records) > s.o.NodeMaxRecords {
			return nil, &apiError{413, sizerapi.CodeTooLarge, fmt.Sprintf("%d records in one batch, at most %d from a node", len(b.Records), s.o.NodeMaxRecords)}
		}
	}
	if b.Node == "" {
		return nil, badRequest("report batch has no node name")
	}
	if len(b.Records) > MaxRecords {
		return nil, &apiError{413, sizerapi.CodeTooLarge, fmt.Sprintf("%d records in one batch, at most %d", len(b.Records), MaxRecords)}
	}
	for i, rec := range b.Records {
		switch rec.Kind {
		case sizerapi.KindGPU, sizerapi.KindJobSummary, sizerapi.KindInterruption:
		case sizerapi.KindGPUHealth:
			if why := healthProblem(rec.Health); why != "" {
				return nil, badRequest("records[%d]: %s", i, why)
			}
		default:
			return nil, badRequest("records[%d]: unknown kind %q (want gpu, job_summary, interruption or gpu_health)", i, rec.Kind)
		}
		if rec.Kind == sizerapi.KindJobSummary && rec.Summary == nil || rec.Kind == sizerapi.KindInterruption && rec.Event == nil {
			return nil, badRequest("records[%d]: kind %s without its %s field", i, rec.Kind, map[sizerapi.Kind]string{sizerapi.KindJobSummary: "summary", sizerapi.KindInterruption: "event"}[rec.Kind])
		}
	}
	var refused int
	var problems []string
	if p.Node != "" {
		var err error
		if refused, problems, err = s.trustBatch(r.Context(), p, nodeIdentity(r), &b); err != nil {
			return nil, unverifiable("%v", err)
		}
		if refused > 0 {
			s.log.Warn("refused records of a node's report", "node", p.Node, "instance", p.InstanceID, "refused", refused, "problems", problems)
			s.records.WithLabelValues("refused").Add(float64(refused))
		}
	}
	// Commit even if the client goes away: it will resend and dedup keeps it once.
	res := sizerapi.ReportResult{}
	if len(b.Records) > 0 {
		var err error
		if res, err = s.st.AddBatch(context.WithoutCancel(r.Context()), b); err != nil {
			return nil, err
		}
	}
	res.Refused, res.Problems = refused, problems
	s.records.WithLabelValues("accepted").Add(float64(res.Accepted))
	s.records.WithLabelValues("duplicate").Add(float64(res.Duplicates))
	s.records.WithLabelValues("ignored").Add(float64(res.Ignored))
	for _, rec := range b.Records {
		if rec.Kind == sizerapi.KindInterruption {
			s.interrupt.Inc()
		}
		if rec.Kind == sizerapi.KindGPUHealth && rec.Health != nil {
			s.gpuHealth.WithLabelValues(gpuHealthLabel(rec.Health), rec.Health.Action).Inc()
		}
	}
	return res, nil
}

func (s *Server) interruption(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	var in sizerapi.Interruption
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	now := s.now()
	if p.Node != "" {
		// the sizer's own records of the credential's instance, never the body's
		ni := nodeIdentity(r)
		switch {
		case in.InstanceID != "" && in.InstanceID != p.InstanceID:
			return nil, forbidden("credential of instance %s may not report an interruption of %s", p.InstanceID, in.InstanceID)
		case in.Node != "" && in.Node != p.Node:
			return nil, forbidden("credential of node %s may not report an interruption of node %s", p.Node, in.Node)
		case in.InstanceType != "" && in.InstanceType != ni.InstanceType, in.Zone != "" && in.Zone != ni.Zone:
			return nil, forbidden("instance %s is a %s in %s, not a %s in %s", p.InstanceID, ni.InstanceType, ni.Zone, in.InstanceType, in.Zone)
		}
		w := window{hi: now.Add(s.o.ClockSkew), now: now}
		if !ni.Pending.IsZero() {
			w.lo = ni.Pending.Add(-s.o.ClockSkew)
		}
		if why := s.interruptionProblem(ni, in.Action, in.Time, w); why != "" {
			return nil, badRequest("interruption refused: %s", why)
		}
		in = sizerapi.Interruption{InstanceID: p.InstanceID, Node: p.Node, InstanceType: ni.InstanceType, Zone: ni.Zone, Action: in.Action, Time: w.clamp(in.Time)}
		if seen, err := s.st.HasInterruption(r.Context(), p.InstanceID); err != nil {
			return nil, err
		} else if seen {
			return struct{}{}, nil // one notice per instance: the rest change nothing
		}
	}
	if in.InstanceID == "" {
		return nil, badRequest("interruption has no instance_id")
	}
	if in.Time.IsZero() {
		in.Time = now
	}
	if err := s.st.AddInterruption(context.WithoutCancel(r.Context()), in); err != nil {
		return nil, err
	}
	s.interrupt.Inc()
	return struct{}{}, nil
}

func (s *Server) launch(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var ev sizerapi.InstanceEvent
	if err := decode(r, &ev); err != nil {
		return nil, err
	}
	if ev.InstanceID == "" || ev.InstanceType == "" {
		return nil, badRequest("launch needs instance_id and instance_type")
	}
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	price := ev.PriceUSD
	reserved := capacity.Type(ev.Capacity) == capacity.Reserved
	if reserved {
		price = 0 // the reservation is paid whether used or not
	} else if price <= 0 {
		c := capacity.Type(ev.Capacity)
		if c != capacity.Spot {
			c = capacity.OnDemand
		}
		p, ok := s.pol.HourlyPrice(ev.InstanceType, c)
		if !ok {
			return nil, badRequest("no %s price for %s in the catalog; send price_usd", c, ev.InstanceType)
		}
		price = p
	}
	l := store.Launch{Event: ev, PriceUSD: price, PriceSource: store.PriceResume, Source: "resume"}
	switch {
	case reserved:
		l.PriceSource = store.PriceReservation
	case ev.PriceUSD <= 0:
		l.PriceSource = store.PriceCatalog
	}
	if od, ok := s.pol.HourlyPrice(ev.InstanceType, capacity.OnDemand); ok {
		l.OnDemandUSD = od
	}
	if err := s.st.RecordInstance(context.WithoutCancel(r.Context()), l); err != nil {
		return nil, err
	}
	if ev.Job != nil && ev.Job.JobID != "" && ev.Job.User != "" {
		// the job enters its history at launch too (PrologSlurmctld records
		// every start, warm-reused nodes included)
		if err := s.st.StartRun(context.WithoutCancel(r.Context()), runKey(*ev.Job), sizerapi.JobStart{Job: *ev.Job, Start: ev.Time}); err != nil {
			return nil, err
		}
	}
	return struct{}{}, nil
}

func (s *Server) terminate(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var ev sizerapi.InstanceEvent
	if err := decode(r, &ev); err != nil {
		return nil, err
	}
	if ev.InstanceID == "" {
		return nil, badRequest("terminate needs instance_id")
	}
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	switch ev.Source {
	case "", sizerapi.SourceBurst, sizerapi.SourceEC2:
	default:
		return nil, badRequest("terminate source %q: want burst or ec2", ev.Source)
	}
	known, err := s.st.RecordEnd(context.WithoutCancel(r.Context()), ev.InstanceID, ev.Time, ev.Source, ev.Reason)
	if err != nil {
		return nil, err
	}
	if !known {
		s.log.Warn("termination of an instance the sizer never saw launch", "instance", ev.InstanceID)
	}
	return struct{}{}, nil
}
