package server

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/budget"
	"github.com/burst-hpc/burst/sizer/report"
	"github.com/burst-hpc/burst/sizer/store"
)

// Month is the ledger's view of the month containing now: every
// instance's charges, by account and by job.
type Month struct {
	From, Now time.Time
	Rows      []store.Row
	Charges   []budget.Charge
	ByAccount map[string]float64
	OnDemand  map[string]float64
	ByJob     map[string]float64
	Burn      map[string]float64
}

// LedgerMonth reads the month's ledger from a store (shared with the local
// spend path, which opens the database read-only).
func LedgerMonth(ctx context.Context, st *store.Store, owner string, now time.Time) (Month, error) {
	from := budget.MonthStart(now)
	rows, err := st.Rows(ctx, from, now)
	if err != nil {
		return Month{}, err
	}
	m := Month{From: from, Now: now, Rows: rows, ByAccount: map[string]float64{}, OnDemand: map[string]float64{}, ByJob: map[string]float64{}}
	ins := store.Instances(rows)
	// the month's window ends with the month: a segment's 60 s minimum
	// reaching past now is part of its bill already
	to := from.AddDate(0, 1, 0)
	for _, in := range ins {
		for _, c := range in.Charges(from, to, now, owner) {
			m.Charges = append(m.Charges, c)
			m.ByAccount[c.Account] += c.USD
			m.OnDemand[c.Account] += c.OnDemandUSD
			if c.JobID != "" {
				m.ByJob[c.JobID] += c.USD
			}
		}
	}
	m.Burn = budget.Burn(ins, now, owner)
	return m, nil
}

// Spend is an account's figure for admission control.
func (m Month) Spend(account string) sizerapi.AccountSpend {
	out := sizerapi.AccountSpend{Account: account, SpentUSD: m.ByAccount[account], Jobs: map[string]float64{}, BurnUSDPerHour: m.Burn[account], AsOf: m.Now}
	for _, c := range m.Charges {
		if c.Account == account && c.JobID != "" {
			out.Jobs[c.JobID] += c.USD
		}
	}
	return out
}

func (s *Server) month(ctx context.Context) (Month, error) {
	return LedgerMonth(ctx, s.st, s.o.IdleOwner, s.now())
}

func (s *Server) budgetStatuses(ctx context.Context) ([]sizerapi.BudgetStatus, error) {
	return BudgetStatuses(ctx, s.st, BudgetOptions{Caps: s.o.Budgets, OnUnknown: s.o.OnUnknown, IdleOwner: s.o.IdleOwner, StateDir: s.o.StateDir, Log: s.log}, s.now())
}

// BudgetOptions say how to read budgets' standing.
type BudgetOptions struct {
	Caps      map[string]float64
	OnUnknown map[string]string
	IdleOwner string
	StateDir  string // the admissions file (reservations)
	Log       *slog.Logger
}

// BudgetStatuses is every account's standing this month: capped accounts
// and accounts with spend, with reservations, burn rate and forecast
// (shared with `burst-sizer report --local`).
func BudgetStatuses(ctx context.Context, st *store.Store, o BudgetOptions, now time.Time) ([]sizerapi.BudgetStatus, error) {
	m, err := LedgerMonth(ctx, st, o.IdleOwner, now)
	if err != nil {
		return nil, err
	}
	var res []admit.Entry
	if o.StateDir != "" {
		res, err = admit.New(admit.Options{Dir: o.StateDir}).Reservations()
		if err != nil && o.Log != nil {
			o.Log.Warn("reading admissions for budget reservations", "err", err)
		}
	}
	names := map[string]bool{}
	for a := range o.Caps {
		names[a] = true
	}
	for a := range m.ByAccount {
		names[a] = true
	}
	var out []sizerapi.BudgetStatus
	for a := range names {
		b := sizerapi.BudgetStatus{Account: a, MonthlyUSD: o.Caps[a], SpentUSD: m.ByAccount[a], Since: m.From,
			BurnUSDPerHour: m.Burn[a], OnDemandUSD: m.OnDemand[a], SavingUSD: m.OnDemand[a] - m.ByAccount[a], OnUnknown: o.OnUnknown[a]}
		b.ReservedUSD = admit.Reserved(res, a, m.Spend(a).Jobs)
		if b.MonthlyUSD > 0 {
			b.RemainingUSD = max(b.MonthlyUSD-b.SpentUSD-b.ReservedUSD, 0)
			b.Over = b.SpentUSD >= b.MonthlyUSD
			if f := budget.Forecast(b.MonthlyUSD, b.SpentUSD, b.ReservedUSD, b.BurnUSDPerHour, now); !f.IsZero() {
				b.ForecastCapAt = &f
			}
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out, nil
}

func (s *Server) budgets(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	out, err := s.budgetStatuses(r.Context())
	if out == nil {
		out = []sizerapi.BudgetStatus{}
	}
	return out, err
}

func (s *Server) report(w http.ResponseWriter, r *http.Request, _ auth.Principal) (any, error) {
	sts, err := s.budgetStatuses(r.Context())
	if err != nil {
		return nil, err
	}
	return BuildReport(r.Context(), s.st, sts, s.o.IdleOwner, s.now())
}

// BuildReport builds the monthly report from a store and the budgets'
// standing (shared with `burst-sizer report` reading the database
// directly).
func BuildReport(ctx context.Context, st *store.Store, budgets []sizerapi.BudgetStatus, owner string, now time.Time) (sizerapi.UsageReport, error) {
	from := budget.MonthStart(now)
	jobs, err := st.Jobs(ctx, from, "", "", 0)
	if err != nil {
		return sizerapi.UsageReport{}, err
	}
	m, err := LedgerMonth(ctx, st, owner, now)
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
