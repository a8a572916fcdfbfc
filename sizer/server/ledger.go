package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/spend"
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
	return s.AccountSpend(r.Context(), account)
}

// AccountSpend is an account's spend now (admission control inside the
// sizer: the release of held jobs).
func (s *Server) AccountSpend(ctx context.Context, account string) (sizerapi.AccountSpend, error) {
	t, err := s.tally(ctx)
	if err != nil {
		return sizerapi.AccountSpend{}, err
	}
	out := t.Spend(account)
	out.Source = "sizer"
	return out, nil
}

func (s *Server) ledger(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	return spend.Ledger(r.Context(), s.st, s.o.IdleOwner, s.now())
}

// ErrNotLeader is LedgerSync's error on a sizer that stands by.
var ErrNotLeader = errors.New("another sizer leads")

func (s *Server) ledgerSync(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	if s.o.LedgerSync == nil {
		return nil, &apiError{409, sizerapi.CodeBadRequest, "this sizer runs without EC2 access (no reconciler); nothing to sync"}
	}
	return s.o.LedgerSync(r.Context())
}
