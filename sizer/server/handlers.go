package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
)

func (s *Server) rank(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var rq sizerapi.RankRequest
	if err := decode(r, &rq); err != nil {
		return nil, err
	}
	req, _ := rq.Job.Policy() // metadata problems were reported at submission; rank with what parses
	in := sizing.RankInput{Class: rq.Class, Request: req, Zones: rq.Zones, EstHours: rq.EstHours}
	if len(in.Zones) == 0 {
		in.Zones = s.o.Zones
	}
	for _, u := range rq.Unavailable {
		in.Unavailable = append(in.Unavailable, sizing.Unavailable{InstanceType: u.InstanceType, Zone: u.Zone, Capacity: jobmeta.Capacity(u.Capacity), Reason: u.Reason})
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
		in.Unavailable = append(in.Unavailable, sizing.Unavailable{InstanceType: it.InstanceType, Zone: it.Zone, Capacity: jobmeta.CapacitySpot, Reason: reason})
		resp.Avoided = append(resp.Avoided, sizerapi.Unavailable{InstanceType: it.InstanceType, Zone: it.Zone, Capacity: string(jobmeta.CapacitySpot), Reason: reason})
	}
	if in.Budget, err = AccountBudget(r.Context(), s.st, s.o.Budgets, req.Account, now); err != nil {
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

func (s *Server) route(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var rq sizerapi.RouteRequest
	if err := decode(r, &rq); err != nil {
		return nil, err
	}
	d, err := Decide(r.Context(), s.pol, s.st, s.o.Budgets, rq.Job, s.now(), s.o.HistoryJobs)
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
	if b.Node == "" {
		return nil, badRequest("report batch has no node name")
	}
	if !p.MayReportFor(b.Node) {
		return nil, &apiError{403, sizerapi.CodeForbidden, fmt.Sprintf("credential of node %s may not report for node %s", p.Node, b.Node)}
	}
	if len(b.Records) > MaxRecords {
		return nil, &apiError{413, sizerapi.CodeTooLarge, fmt.Sprintf("%d records in one batch, at most %d", len(b.Records), MaxRecords)}
	}
	for i, rec := range b.Records {
		switch rec.Kind {
		case sizerapi.KindGPU, sizerapi.KindJobSummary, sizerapi.KindInterruption:
		default:
			return nil, badRequest("records[%d]: unknown kind %q (want gpu, job_summary or interruption)", i, rec.Kind)
		}
		if rec.Kind == sizerapi.KindJobSummary && rec.Summary == nil || rec.Kind == sizerapi.KindInterruption && rec.Event == nil {
			return nil, badRequest("records[%d]: kind %s without its %s field", i, rec.Kind, map[sizerapi.Kind]string{sizerapi.KindJobSummary: "summary", sizerapi.KindInterruption: "event"}[rec.Kind])
		}
	}
	// Commit even if the client goes away: it will resend and dedup keeps it once.
	res, err := s.st.AddBatch(context.WithoutCancel(r.Context()), b)
	if err != nil {
		return nil, err
	}
	s.records.WithLabelValues("accepted").Add(float64(res.Accepted))
	s.records.WithLabelValues("duplicate").Add(float64(res.Duplicates))
	for _, rec := range b.Records {
		if rec.Kind == sizerapi.KindInterruption {
			s.interrupt.Inc()
		}
	}
	return res, nil
}

func (s *Server) interruption(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	var in sizerapi.Interruption
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.InstanceID == "" {
		return nil, badRequest("interruption has no instance_id")
	}
	if !p.MayReportFor(in.Node) {
		return nil, &apiError{403, sizerapi.CodeForbidden, fmt.Sprintf("credential of node %s may not report for node %q", p.Node, in.Node)}
	}
	if in.Time.IsZero() {
		in.Time = s.now()
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
	if price <= 0 {
		c := jobmeta.Capacity(ev.Capacity)
		if c != jobmeta.CapacitySpot {
			c = jobmeta.CapacityOnDemand
		}
		p, ok := s.pol.HourlyPrice(ev.InstanceType, c)
		if !ok {
			return nil, badRequest("no %s price for %s in the catalog; send price_usd", c, ev.InstanceType)
		}
		price = p
	}
	return struct{}{}, s.st.RecordLaunch(context.WithoutCancel(r.Context()), ev, price)
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
	known, err := s.st.RecordTerminate(context.WithoutCancel(r.Context()), ev.InstanceID, ev.Time)
	if err != nil {
		return nil, err
	}
	if !known {
		s.log.Warn("termination of an instance the sizer never saw launch", "instance", ev.InstanceID)
	}
	return struct{}{}, nil
}
