package server

import (
	"context"
	"net/http"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/budget"
	"github.com/burst-hpc/burst/sizer/store"
)

func (s *Server) ledgerRoutes() {
	s.handle("POST "+sizerapi.PathInstanceIntent, "intent", roleAdmin, s.intent)
	s.handle("POST "+sizerapi.PathJobRun, "job_run", roleAdmin, s.jobRun)
	s.handle("GET "+sizerapi.PathSpend, "spend", roleAdmin, s.spend)
	s.handle("GET "+sizerapi.PathLedger, "ledger", roleAdmin, s.ledger)
	s.handle("POST "+sizerapi.PathLedgerSync, "ledger_sync", roleAdmin, s.ledgerSync)
}

func (s *Server) intent(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var in sizerapi.LaunchIntent
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.ClientToken == "" || len(in.Nodes) == 0 || in.Time.IsZero() {
		return nil, badRequest("intent needs client_token, nodes and time")
	}
	return struct{}{}, s.st.RecordIntent(context.WithoutCancel(r.Context()), in)
}

func (s *Server) jobRun(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	var run sizerapi.JobRun
	if err := decode(r, &run); err != nil {
		return nil, err
	}
	if run.JobID == "" || len(run.Nodes) == 0 || run.Start.IsZero() {
		return nil, badRequest("job run needs job_id, nodes and start")
	}
	if !run.End.IsZero() && run.End.Before(run.Start) {
		return nil, badRequest("job run ends (%s) before it starts (%s)", run.End, run.Start)
	}
	return struct{}{}, s.st.RecordRun(context.WithoutCancel(r.Context()), run)
}

func (s *Server) spend(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	account := r.URL.Query().Get("account")
	if account == "" {
		return nil, badRequest("spend needs ?account=")
	}
	m, err := s.month(r.Context())
	if err != nil {
		return nil, err
	}
	out := m.Spend(account)
	out.Source = "sizer"
	return out, nil
}

// AccountSpend is an account's spend now (admission control inside the
// sizer: the release of held jobs).
func (s *Server) AccountSpend(ctx context.Context, account string) (sizerapi.AccountSpend, error) {
	m, err := s.month(ctx)
	if err != nil {
		return sizerapi.AccountSpend{}, err
	}
	out := m.Spend(account)
	out.Source = "sizer"
	return out, nil
}

func (s *Server) ledger(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	return BuildLedger(r.Context(), s.st, s.o.IdleOwner, s.now())
}

func (s *Server) ledgerSync(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	if s.o.LedgerSync == nil {
		return nil, &apiError{409, sizerapi.CodeBadRequest, "this sizer runs without EC2 access (no reconciler); nothing to sync"}
	}
	return s.o.LedgerSync(r.Context())
}

// BuildLedger lists every instance the ledger has (all time) with its bill,
// and this month's charges.
func BuildLedger(ctx context.Context, st *store.Store, owner string, now time.Time) (sizerapi.Ledger, error) {
	rows, err := st.Rows(ctx, time.Time{}, time.Time{})
	if err != nil {
		return sizerapi.Ledger{}, err
	}
	from := budget.MonthStart(now)
	out := sizerapi.Ledger{From: from, To: now, Instances: []sizerapi.LedgerInstance{}, Charges: []sizerapi.Charge{}}
	for _, r := range rows {
		out.Instances = append(out.Instances, LedgerInstance(r, now))
		for _, c := range r.Charges(from, from.AddDate(0, 1, 0), now, owner) {
			kind := "job"
			if c.Idle {
				kind = "idle"
			}
			out.Charges = append(out.Charges, sizerapi.Charge{InstanceID: c.InstanceID, JobID: c.JobID, Account: c.Account, User: c.User, Kind: kind,
				Seconds: c.Seconds, USD: c.USD, OnDemandUSD: c.OnDemandUSD})
		}
	}
	return out, nil
}

// LedgerInstance is a row's bill as the API shows it.
func LedgerInstance(r store.Row, now time.Time) sizerapi.LedgerInstance {
	bs := r.Bill(now)
	secs, usd, gross := budget.Total(bs)
	li := sizerapi.LedgerInstance{InstanceID: r.ID, Node: r.Node, InstanceType: r.InstanceType, Zone: r.Zone, Capacity: r.Capacity,
		PriceUSD: r.PriceUSD, PriceSource: r.PriceSource, OnDemandUSD: r.OnDemandUSD, Account: r.Account, User: r.User, JobID: r.JobID,
		Source: r.Source, Launched: r.Launched, End: r.End, EndSource: r.EndSource, EndReason: r.EndReason,
		Segments: len(bs), BilledSeconds: secs, USD: usd, GrossUSD: gross, StartSource: "launch", BillingStart: r.Launched}
	if len(bs) > 0 {
		li.BillingStart = bs[0].Start
		if bs[0].FromEvents {
			li.StartSource = "ec2-event"
		}
		last := bs[len(bs)-1]
		li.Open, li.Waived = last.Open, last.Waived
	} else if r.End.IsZero() {
		li.Open = true // launched, not running yet
	}
	return li
}
