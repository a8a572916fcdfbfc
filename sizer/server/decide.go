package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

// DefaultHistoryJobs is how many past runs of a recurring job (user, job
// name, model metadata: sizing.RecurringKey) learning looks at.
const DefaultHistoryJobs = 20

// Decide makes the submission-time decision for a job: metadata problems
// refuse the job (never silently ignored), the account's budget comes from
// the store's instances and caps, and history from the store's usage. st may
// be nil (no state: no history, no spend). It is shared by the daemon's
// /v1/route and by `burst-sizer route` when the daemon is down.
//
// Bad metadata refuses the job, naming at most maxShownProblems problems
// and counting the rest.
//
// rd reads the month's spend for the budget (nil: none known), with owner
// (accounting.idle_owner) paying for idle time, as every other reader of
// rd does.
func Decide(ctx context.Context, p *sizing.Policy, st *store.Store, rd *spend.Reader, caps map[string]float64, owner string, job sizerapi.JobRequest, now time.Time, historyJobs int) (sizing.Decision, error) {
	req, mdErrs := job.Policy()
	if len(mdErrs) > 0 {
		var msgs []string
		for i, e := range mdErrs {
			if i == maxShownProblems {
				msgs = append(msgs, fmt.Sprintf("and %d more problem(s)", len(mdErrs)-i))
				break
			}
			msgs = append(msgs, e.Error())
		}
		return sizing.Decision{Refused: true, Nodes: max(req.Nodes, 1), Reason: "bad burst metadata",
			RefuseMessage: "job refused: " + strings.Join(msgs, " | ") + ". Fix the --comment (see `burst-sizer route --help`) and submit again."}, nil
	}
	in := sizing.RouteInput{Request: req}
	key := sizing.RecurringKey(req.User, req.JobName, req.Metadata) // from the metadata parsed once above
	if st != nil {
		if historyJobs <= 0 {
			historyJobs = DefaultHistoryJobs
		}
		h, err := st.HistoryByKey(ctx, key, historyJobs)
		if err != nil {
			return sizing.Decision{}, fmt.Errorf("reading history: %w", err)
		}
		in.History = h
	}
	in.History.Key = key
	b, err := AccountBudget(ctx, rd, caps, owner, req.Account, now)
	if err != nil {
		return sizing.Decision{}, err
	}
	in.Budget = b
	return p.Route(in)
}

// AccountBudget returns an account's cap and spend this month (spend 0 when
// rd is nil); owner is accounting.idle_owner.
func AccountBudget(ctx context.Context, rd *spend.Reader, caps map[string]float64, owner, account string, now time.Time) (sizing.Budget, error) {
	b := sizing.Budget{Account: account, CapUSD: caps[account]}
	if b.CapUSD <= 0 || rd == nil {
		return b, nil
	}
	// the kept sums (a Tally costs the running instances, not the month's)
	t, err := rd.Tally(ctx, owner, now, spend.TallyOptions{})
	if err != nil {
		return b, fmt.Errorf("reading spend of account %s: %w", account, err)
	}
	b.SpentUSD = t.Accounts[account].USD
	return b, nil
}

// errCode maps policy errors to API codes and HTTP statuses.
func errCode(err error) (int, string) {
	switch {
	case errors.Is(err, sizing.ErrOverBudget):
		return 402, sizerapi.CodeOverBudget
	case errors.Is(err, sizing.ErrUnknownClass):
		return 404, sizerapi.CodeUnknownClass
	case errors.Is(err, sizing.ErrNoOffering):
		return 409, sizerapi.CodeNoOffering
	case errors.Is(err, sizing.ErrNoClass):
		return 422, sizerapi.CodeNoClass
	case errors.Is(err, ErrNotLeader), errors.Is(err, store.ErrDeposed):
		return 503, sizerapi.CodeNotLeader
	}
	return 500, sizerapi.CodeInternal
}

// maxShownProblems is how many problems one message lists.
const maxShownProblems = 10
