package ui

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/version"
	"github.com/burst-hpc/burst/sizer/dash"
)

// basePage is what the layout needs.
type basePage struct {
	Page     string // nav entry
	Admin    bool
	Login    string // who is logged in: "admin" or "account NAME"; "" before login
	Scope    string // account shown; "" = all
	Query    string // "?account=X" to keep the scope in nav links
	Now      time.Time
	Rendered time.Duration
	Version  string // the sizer's burst version
}

func (u *UI) base(page string, p auth.Principal, sc dash.Scope) basePage {
	b := basePage{Page: page, Admin: p.Admin, Scope: sc.Account, Now: u.o.Now(), Version: version.Version}
	switch {
	case p.Admin:
		b.Login = "admin"
		if sc.Account != "" {
			b.Query = "?account=" + sc.Account
		}
	case p.Account != "":
		b.Login = "account " + p.Account
	}
	return b
}

func (u *UI) serverError(w http.ResponseWriter, r *http.Request, page string, err error) {
	u.log.Error("reading dashboard data", "page", page, "err", err)
	u.fail(w, r, http.StatusInternalServerError, "The sizer could not read its state; its log says why.")
}

type fleetPage struct {
	basePage
	V     sizerapi.FleetView
	Chart template.HTML
	// Q filters the node rows (a node, state, job, user or account
	// holding it); All lists the powered-down nodes the page otherwise
	// only counts.
	Q   string
	All bool
}

// Lists says whether the page shows n's row: a node that needs attention
// or has something to show, or, with All, every node; with Q, only those
// matching it.
func (p fleetPage) Lists(n sizerapi.FleetNode) bool {
	if p.Q != "" {
		q := strings.ToLower(p.Q)
		return slices.ContainsFunc([]string{n.Node, n.SlurmState, n.JobID, n.JobName, n.User, n.Account, n.InstanceID, n.Attention},
			func(s string) bool { return strings.Contains(strings.ToLower(s), q) })
	}
	return p.All || n.Attention != "" || n.InstanceID != "" || !slices.Contains(strings.Split(n.SlurmState, "+"), "POWERED_DOWN")
}

// Rows are the indexes in c.Nodes of the rows the page lists: the nodes
// that need attention first, then the others it lists, each in order.
func (p fleetPage) Rows(c sizerapi.FleetClass) []int {
	var first, rest []int
	for i, n := range c.Nodes {
		switch {
		case !p.Lists(n):
		case n.Attention != "":
			first = append(first, i)
		default:
			rest = append(rest, i)
		}
	}
	return append(first, rest...)
}

// maxFleetQuery bounds the filter's length.
const maxFleetQuery = 100

func (u *UI) fleet(w http.ResponseWriter, r *http.Request, sc dash.Scope, p auth.Principal) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if len(q) > maxFleetQuery {
		u.fail(w, r, http.StatusBadRequest, fmt.Sprintf("The filter q is %d characters long; give at most %d (part of a node, state, job, user or account).", len(q), maxFleetQuery))
		return
	}
	v, err := u.o.Source.Fleet(r.Context(), sc)
	if err != nil {
		u.serverError(w, r, "fleet", err)
		return
	}
	u.render(w, r, http.StatusOK, "fleet", fleetPage{basePage: u.base("fleet", p, sc), V: v, Chart: fleetChart(v),
		Q: q, All: r.URL.Query().Get("all") == "1"})
}

type jobsPage struct {
	basePage
	V             sizerapi.JobsView
	User, JobName string
	Chart         template.HTML
}

func (u *UI) jobs(w http.ResponseWriter, r *http.Request, sc dash.Scope, p auth.Principal) {
	q := dash.JobsQuery{User: r.URL.Query().Get("user"), JobName: r.URL.Query().Get("name")}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > dash.MaxJobsLimit {
			u.fail(w, r, http.StatusBadRequest, "limit: want a number from 1 to "+strconv.Itoa(dash.MaxJobsLimit)+".")
			return
		}
		q.Limit = n
	}
	v, err := u.o.Source.Jobs(r.Context(), sc, q)
	if err != nil {
		u.serverError(w, r, "jobs", err)
		return
	}
	u.render(w, r, http.StatusOK, "jobs", jobsPage{basePage: u.base("jobs", p, sc), V: v, User: q.User, JobName: q.JobName, Chart: jobsChart(v)})
}

type jobPage struct {
	basePage
	J sizerapi.JobRow
}

func (u *UI) job(w http.ResponseWriter, r *http.Request, sc dash.Scope, p auth.Principal) {
	j, err := u.o.Source.Job(r.Context(), sc, r.PathValue("id"))
	if errors.Is(err, dash.ErrNotFound) {
		// the same page for another account's job and for none
		u.fail(w, r, http.StatusNotFound, "No such job in the account(s) this login may read.")
		return
	}
	if err != nil {
		u.serverError(w, r, "job", err)
		return
	}
	u.render(w, r, http.StatusOK, "job", jobPage{basePage: u.base("jobs", p, sc), J: j})
}

type moneyPage struct {
	basePage
	V                         sizerapi.MoneyView
	Budgets, PerDay, PerUsers template.HTML
	IdleTimeout               string
}

func (u *UI) money(w http.ResponseWriter, r *http.Request, sc dash.Scope, p auth.Principal) {
	v, err := u.o.Source.Money(r.Context(), sc)
	if err != nil {
		u.serverError(w, r, "money", err)
		return
	}
	pg := moneyPage{basePage: u.base("money", p, sc), V: v, IdleTimeout: dur(v.IdleTimeout)}
	pg.Budgets, pg.PerDay, pg.PerUsers = budgetChart(v), dayChart(v), userChart(v)
	u.render(w, r, http.StatusOK, "money", pg)
}

type rightSizingPage struct {
	basePage
	V     sizerapi.RightSizingView
	Chart template.HTML
}

func (u *UI) rightSizing(w http.ResponseWriter, r *http.Request, sc dash.Scope, p auth.Principal) {
	v, err := u.o.Source.RightSizing(r.Context(), sc)
	if err != nil {
		u.serverError(w, r, "rightsizing", err)
		return
	}
	u.render(w, r, http.StatusOK, "rightsizing", rightSizingPage{basePage: u.base("rightsizing", p, sc), V: v, Chart: savingsChart(v)})
}

// sortedKeys returns a map's keys in order.
func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
