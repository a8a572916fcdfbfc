package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/report"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

func (s *Server) budgetOptions() spend.BudgetOptions {
	o := spend.BudgetOptions{Caps: s.o.Budgets, OnUnknown: s.o.OnUnknown, IdleOwner: s.o.IdleOwner, StateDir: s.o.StateDir, Cluster: s.o.Cluster, Log: s.log}
	return o.On(s.st) // reservations of every sizer and cluster on PostgreSQL
}

// tally is the month's spend from the Reader's kept sums (it costs the
// running instances, not the month's), with the configured idle owner.
func (s *Server) tally(ctx context.Context) (spend.Tally, error) {
	return s.months.Tally(ctx, s.o.IdleOwner, s.now(), spend.TallyOptions{})
}

func (s *Server) onDemand(typ string) (float64, bool) {
	return s.pol.HourlyPrice(typ, capacity.OnDemand)
}

func (s *Server) budgetStatuses(ctx context.Context) ([]sizerapi.BudgetStatus, error) {
	t, err := s.tally(ctx)
	if err != nil {
		return nil, err
	}
	return t.Budgets(s.budgetOptions()), nil
}

// budgets is every account's standing the principal may read: spend,
// reservations, burn rate, forecast, on-demand equivalent and saving.
func (s *Server) budgets(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	sc, err := scope(r, p)
	if err != nil {
		return nil, err
	}
	all, err := s.budgetStatuses(r.Context())
	if err != nil {
		return nil, err
	}
	out := []sizerapi.BudgetStatus{}
	for _, b := range all {
		if sc.All() || b.Account == sc.Account {
			out = append(out, b)
		}
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

// BuildReport builds the monthly report from a store and the budgets'
// standing (`burst-sizer report --local`, reading the database directly;
// the daemon's report is the dashboard's, over the same ledger).
func BuildReport(ctx context.Context, st *store.Store, budgets []sizerapi.BudgetStatus, owner string, now time.Time) (sizerapi.UsageReport, error) {
	from := billing.MonthStart(now)
	jobs, err := st.Jobs(ctx, from, "", "", 0)
	if err != nil {
		return sizerapi.UsageReport{}, err
	}
	m, err := spend.Read(ctx, st, owner, now)
	if err != nil {
		return sizerapi.UsageReport{}, err
	}
	return report.Build(jobs, m.Charges, budgets, now, report.Options{}), nil
}

// budgetCollector exports per-account spend and caps at scrape time.
type budgetCollector struct{ s *Server }

var (
	spendDesc    = prometheus.NewDesc("burst_sizer_account_spend_usd", "Spend this month by account (USD).", []string{"account"}, nil)
	capDesc      = prometheus.NewDesc("burst_sizer_account_budget_usd", "Monthly budget by account (USD).", []string{"account"}, nil)
	overDesc     = prometheus.NewDesc("burst_sizer_account_over_budget", "1 when the account has spent its budget.", []string{"account"}, nil)
	reservedDesc = prometheus.NewDesc("burst_sizer_account_reserved_usd", "What the account's admitted jobs may still spend (USD).", []string{"account"}, nil)
	burnDesc     = prometheus.NewDesc("burst_sizer_account_burn_usd_per_hour", "What the account's running instances cost per hour now.", []string{"account"}, nil)
)

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{spendDesc, capDesc, overDesc, reservedDesc, burnDesc} {
		ch <- d
	}
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
		ch <- prometheus.MustNewConstMetric(burnDesc, prometheus.GaugeValue, b.BurnUSDPerHour, b.Account)
		if b.MonthlyUSD > 0 {
			ch <- prometheus.MustNewConstMetric(capDesc, prometheus.GaugeValue, b.MonthlyUSD, b.Account)
			ch <- prometheus.MustNewConstMetric(reservedDesc, prometheus.GaugeValue, b.ReservedUSD, b.Account)
			over := 0.0
			if b.Over {
				over = 1
			}
			ch <- prometheus.MustNewConstMetric(overDesc, prometheus.GaugeValue, over, b.Account)
		}
	}
}
