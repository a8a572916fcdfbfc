package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/budget"
	"github.com/burst-hpc/burst/sizer/report"
	"github.com/burst-hpc/burst/sizer/store"
)

func (s *Server) budgetStatuses(ctx context.Context) ([]sizerapi.BudgetStatus, error) {
	now := s.now()
	ivs, err := s.st.Intervals(ctx, budget.MonthStart(now), now)
	if err != nil {
		return nil, err
	}
	var out []sizerapi.BudgetStatus
	for _, b := range budget.Statuses(s.o.Budgets, ivs, now) {
		out = append(out, sizerapi.BudgetStatus{Account: b.Account, MonthlyUSD: b.MonthlyUSD, SpentUSD: b.SpentUSD, RemainingUSD: b.RemainingUSD, Over: b.Over, Since: b.Since})
	}
	return out, nil
}

func (s *Server) budgets(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	sc, err := scope(r, p)
	if err != nil {
		return nil, err
	}
	m, err := s.dash.Money(r.Context(), sc)
	if err != nil {
		return nil, err
	}
	out := []sizerapi.BudgetStatus{}
	for _, a := range m.Accounts {
		out = append(out, sizerapi.BudgetStatus{Account: a.Account, MonthlyUSD: a.BudgetUSD, SpentUSD: a.SpentUSD, RemainingUSD: a.RemainingUSD, Over: a.Over, Since: m.From})
	}
	return out, nil
}

func (s *Server) report(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	sc, err := scope(r, p)
	if err != nil {
		return nil, err
	}
	return s.dash.Report(r.Context(), sc)
}

// BuildReport builds the monthly report from a store (shared with
// `burst-sizer report` reading the database directly).
func BuildReport(ctx context.Context, st *store.Store, caps map[string]float64, now time.Time) (sizerapi.UsageReport, error) {
	from := budget.MonthStart(now)
	jobs, err := st.Jobs(ctx, from, "", "", 0)
	if err != nil {
		return sizerapi.UsageReport{}, err
	}
	ivs, err := st.Intervals(ctx, from, now)
	if err != nil {
		return sizerapi.UsageReport{}, err
	}
	return report.Build(jobs, ivs, caps, now, report.Options{}), nil
}

// budgetCollector exports per-account spend and caps at scrape time.
type budgetCollector struct{ s *Server }

var (
	spendDesc = prometheus.NewDesc("burst_sizer_account_spend_usd", "Spend this month by account (USD).", []string{"account"}, nil)
	capDesc   = prometheus.NewDesc("burst_sizer_account_budget_usd", "Monthly budget by account (USD).", []string{"account"}, nil)
	overDesc  = prometheus.NewDesc("burst_sizer_account_over_budget", "1 when the account has spent its budget.", []string{"account"}, nil)
)

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- spendDesc
	ch <- capDesc
	ch <- overDesc
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sts, err := c.s.budgetStatuses(ctx)
	if err != nil {
		c.s.log.Warn("collecting budget metrics", "err", err)
		return
	}
	for _, b := range sts {
		ch <- prometheus.MustNewConstMetric(spendDesc, prometheus.GaugeValue, b.SpentUSD, b.Account)
		if b.MonthlyUSD > 0 {
			ch <- prometheus.MustNewConstMetric(capDesc, prometheus.GaugeValue, b.MonthlyUSD, b.Account)
			over := 0.0
			if b.Over {
				over = 1
			}
			ch <- prometheus.MustNewConstMetric(overDesc, prometheus.GaugeValue, over, b.Account)
		}
	}
}
