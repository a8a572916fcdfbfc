package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/dash"
)

// The read-only views (sizerapi.FleetView and the others): the admin token
// reads every account, an account credential its own (the queries filter).

// scope is the caller's scope for a read, narrowed by ?account=.
func scope(r *http.Request, p auth.Principal) (dash.Scope, error) {
	sc, err := dash.ScopeFor(p, r.URL.Query().Get("account"))
	if err != nil {
		return sc, &apiError{403, sizerapi.CodeForbidden, err.Error()}
	}
	return sc, nil
}

func (s *Server) fleet(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	sc, err := scope(r, p)
	if err != nil {
		return nil, err
	}
	return s.dash.Fleet(r.Context(), sc)
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	sc, err := scope(r, p)
	if err != nil {
		return nil, err
	}
	q := dash.JobsQuery{User: r.URL.Query().Get("user"), JobName: r.URL.Query().Get("name")}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > dash.MaxJobsLimit {
			return nil, badRequest("limit %q: want 1 to %d", l, dash.MaxJobsLimit)
		}
		q.Limit = n
	}
	return s.dash.Jobs(r.Context(), sc, q)
}

func (s *Server) job(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	sc, err := scope(r, p)
	if err != nil {
		return nil, err
	}
	j, err := s.dash.Job(r.Context(), sc, r.PathValue("id"))
	if errors.Is(err, dash.ErrNotFound) {
		// the same answer for another account's job and for none
		return nil, &apiError{404, sizerapi.CodeNotFound, "no job " + strconv.Quote(r.PathValue("id")) + " in the account(s) this credential may read"}
	}
	return j, err
}

func (s *Server) money(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	sc, err := scope(r, p)
	if err != nil {
		return nil, err
	}
	return s.dash.Money(r.Context(), sc)
}

func (s *Server) rightSizing(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	sc, err := scope(r, p)
	if err != nil {
		return nil, err
	}
	return s.dash.RightSizing(r.Context(), sc)
}
