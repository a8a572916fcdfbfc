package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

// Limits of the targeted queries: above them a call for everything is
// cheaper than one call per job or node.
const (
	// maxNamedNodes: Nodes(names) asks per node up to this many names.
	maxNamedNodes = 16
	// maxActiveJobs: JobStates with a node filter reads at most this many
	// candidate jobs one by one (after jobs/state/ named them).
	maxActiveJobs = 64
	// parallel requests of one call
	parallel = 4
)

// Ping implements slurm.Client: GET ping; the primary slurmctld must be UP.
func (c *Client) Ping(ctx context.Context) error {
	a, err := c.apiOf(ctx)
	if err != nil {
		return fmt.Errorf("pinging slurmctld through slurmrestd: %w", err)
	}
	ans, err := c.call(ctx, a.ping())
	if err != nil {
		return fmt.Errorf("pinging slurmctld through slurmrestd: %w", err)
	}
	var d struct {
		Pings []struct {
			Hostname string `json:"hostname"`
			Ping     string `json:"ping"`   // v0.0.38
			Pinged   string `json:"pinged"` // v0.0.40 to v0.0.44
			// Responding: v0.0.40+ (v0.0.45 has only this)
			Responding *bool `json:"responding"`
		} `json:"pings"`
	}
	if err := json.Unmarshal(ans.body, &d); err != nil {
		return fmt.Errorf("pinging slurmctld through slurmrestd: %s %s: %w", ans.method, ans.path, err)
	}
	for _, p := range d.Pings {
		if p.Ping == "UP" || p.Pinged == "UP" || p.Responding != nil && *p.Responding {
			return nil
		}
	}
	// slurmctld rejects a bad token by not answering slurmrestd's ping
	return fmt.Errorf("pinging slurmctld through slurmrestd %s %s: no controller UP (%s); a token slurmctld does not accept (wrong key, unknown user, expired) looks the same", ans.method, ans.path, strings.TrimSpace(string(ans.body[:min(len(ans.body), 300)])))
}

// each runs f for every item, parallel at a time, and returns the results
// in order; it stops at the first error.
func each[T, R any](ctx context.Context, items []T, f func(context.Context, T) (R, error)) ([]R, error) {
	out := make([]R, len(items))
	errs := make([]error, len(items))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if out[i], errs[i] = f(ctx, it); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	return out, errors.Join(errs...)
}

// Jobs implements slurm.Client: GET job/{id} per id (unknown ids are left
// out), GET jobs without ids.
func (c *Client) Jobs(ctx context.Context, ids ...uint32) ([]slurm.Job, error) {
	a, err := c.apiOf(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	if len(ids) == 0 {
		ans, err := c.call(ctx, a.jobs())
		if err != nil {
			return nil, fmt.Errorf("listing jobs: %w", err)
		}
		return decode(ans, slurm.ParseJobsJSON)
	}
	jobs, err := c.jobsByID(ctx, a, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(jobs, func(j slurm.Job) bool { return !slices.Contains(ids, j.ID) }), nil
}

// jobsByID reads GET job/{id} for each id, unknown ones left out; an
// array's ID gives every task of it.
func (c *Client) jobsByID(ctx context.Context, a *api, ids []uint32) ([]slurm.Job, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	per, err := each(ctx, ids, func(ctx context.Context, id uint32) ([]slurm.Job, error) {
		ans, err := c.call(ctx, a.job(idArg(id)))
		if errors.Is(err, slurm.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading job %d: %w", id, err)
		}
		return decode(ans, slurm.ParseJobsJSON)
	})
	if err != nil {
		return nil, err
	}
	var jobs []slurm.Job
	for _, js := range per {
		jobs = append(jobs, js...)
	}
	return jobs, nil
}

// JobStates implements slurm.Client. slurmrestd filters jobs by nothing but
// ID, so:
//   - IDs only: GET job/{id} per id;
//   - a node filter (24.05+): GET jobs/state/ names the jobs past PENDING
//     (a pending job has no nodes), then GET job/{id} for each of those, up
//     to maxActiveJobs;
//   - otherwise GET jobs, filtered here.
func (c *Client) JobStates(ctx context.Context, f slurm.JobFilter) ([]slurm.JobState, error) {
	a, err := c.apiOf(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading job states: %w", err)
	}
	ids := f.IDs
	if len(f.States) == 0 && len(f.Nodes) == 0 && len(ids) > 0 {
		// every state
	} else if len(f.Nodes) > 0 && a.jobStates != nil && !slices.ContainsFunc(f.States, func(s string) bool { return strings.EqualFold(s, "PENDING") }) {
		ans, err := c.call(ctx, a.jobStates())
		if err != nil {
			return nil, fmt.Errorf("reading job states: %w", err)
		}
		all, err := decode(ans, slurm.ParseJobStatesJSON)
		if err != nil {
			return nil, fmt.Errorf("reading job states: %w", err)
		}
		// an array task is read through its array's job ID (GET job/N
		// answers every task), then filtered with the others below
		ids = nil
		for _, s := range all {
			if s.State != "PENDING" && (len(f.States) == 0 || slices.ContainsFunc(f.States, func(w string) bool { return strings.EqualFold(w, s.State) })) {
				ids = append(ids, s.JobID)
			}
		}
		if len(ids) == 0 {
			return nil, nil
		}
		if len(ids) > maxActiveJobs {
			ids = nil // cheaper in one call
		}
	} else {
		ids = nil
	}
	var jobs []slurm.Job
	if len(ids) == 0 {
		ans, err := c.call(ctx, a.jobs())
		if err == nil {
			jobs, err = decode(ans, slurm.ParseJobsJSON)
		}
		if err != nil {
			return nil, fmt.Errorf("reading job states: %w", err)
		}
	} else if jobs, err = c.jobsByID(ctx, a, ids); err != nil {
		return nil, fmt.Errorf("reading job states: %w", err)
	}
	var out []slurm.JobState
	for _, j := range jobs {
		if f.Matches(j) { // IDs, States and Nodes, as squeue filters
			out = append(out, j.Brief())
		}
	}
	return out, nil
}

// Nodes implements slurm.Client: GET node/{name} per name (up to
// maxNamedNodes; unknown names are left out), else GET nodes.
func (c *Client) Nodes(ctx context.Context, names ...string) ([]slurm.Node, error) {
	a, err := c.apiOf(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading nodes: %w", err)
	}
	for _, n := range names {
		if n == "" || n[0] == '-' || strings.ContainsFunc(n, func(r rune) bool {
			return r <= ' ' || r == 0x7f || strings.ContainsRune(",[]=\"'\\/?#%", r)
		}) {
			return nil, fmt.Errorf("reading nodes: node name %q: want a plain node name", n)
		}
	}
	var nodes []slurm.Node
	if len(names) == 0 || len(names) > maxNamedNodes {
		ans, err := c.call(ctx, a.nodes())
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		if nodes, err = decode(ans, slurm.ParseNodesJSON); err != nil {
			return nil, err
		}
	} else {
		var mu sync.Mutex
		var unsure []string
		per, err := each(ctx, names, func(ctx context.Context, name string) ([]slurm.Node, error) {
			ans, err := c.call(ctx, a.node(name))
			switch {
			case errors.Is(err, slurm.ErrNotFound) || unknownNode(err):
				return nil, nil
			case a.version == "v0.0.38" && unspecified(err):
				mu.Lock()
				unsure = append(unsure, name)
				mu.Unlock()
				return nil, nil
			case err != nil:
				return nil, fmt.Errorf("reading node %s: %w", name, err)
			}
			return decode(ans, slurm.ParseNodesJSON)
		})
		if err != nil {
			return nil, err
		}
		for _, ns := range per {
			nodes = append(nodes, ns...)
		}
		if len(unsure) > 0 {
			// 22.05 answers some lookups of an unknown node with "Unspecified
			// error" (-1) instead of 2018: the whole list says whether it is
			ans, err := c.call(ctx, a.nodes())
			if err != nil {
				return nil, fmt.Errorf("listing nodes: %w", err)
			}
			all, err := decode(ans, slurm.ParseNodesJSON)
			if err != nil {
				return nil, err
			}
			for _, n := range all {
				if slices.Contains(unsure, n.Name) {
					nodes = append(nodes, n)
				}
			}
		}
	}
	if len(names) == 0 {
		return nodes, nil
	}
	return slices.DeleteFunc(nodes, func(n slurm.Node) bool { return !slices.Contains(names, n.Name) }), nil
}

// unknownNode: 23.02+ answers GET node/NAME of an unknown node with 200 and
// the error "Failure to query node NAME" numbered 0 (22.05: 2018, "Invalid
// node name specified", which Classify maps).
func unknownNode(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	for _, p := range ae.Problems {
		if p.Number != 0 || !strings.HasPrefix(p.Description, "Failure to query node") {
			return false
		}
	}
	return len(ae.Problems) > 0
}

// unspecified: an answer whose only error is Slurm's "Unspecified error" (-1).
func unspecified(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && len(ae.Problems) == 1 && ae.Problems[0].Number == -1
}

// nodeUpdate is the body of POST node/{name} and POST nodes/ (v0.0.40+).
type nodeUpdate struct {
	Name     []string `json:"name,omitempty"` // POST nodes/ only
	State    []string `json:"state,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Comment  string   `json:"comment,omitempty"`
	Extra    string   `json:"extra,omitempty"`
	Address  []string `json:"address,omitempty"`
	Hostname []string `json:"hostname,omitempty"`
}

// nodeStates maps scontrol's node state words to the data parsers' flag
// lists: POWER_DOWN_ASAP and POWER_DOWN_FORCE are named only from v0.0.45
// on and are, as scontrol sends them, POWER_DOWN with POWER_DRAIN
// (ASAP: once the jobs end) or with POWERED_DOWN (FORCE: now).
func nodeStates(s string) []string {
	switch s = strings.ToUpper(s); s {
	case "":
		return nil
	case "POWER_DOWN_ASAP":
		return []string{"POWER_DOWN", "POWER_DRAIN"}
	case "POWER_DOWN_FORCE":
		return []string{"POWER_DOWN", "POWERED_DOWN"}
	}
	return []string{s}
}

// UpdateNodes implements slurm.Client: per merged update
// (slurm.MergeNodeUpdates), POST node/{name} for one node, POST nodes/ for
// several. 22.05's REST API cannot update nodes: the fallback does.
func (c *Client) UpdateNodes(ctx context.Context, updates ...slurm.NodeUpdate) error {
	merged, err := slurm.MergeNodeUpdates(updates)
	if err != nil {
		return err
	}
	a, err := c.apiOf(ctx)
	if err != nil {
		return fmt.Errorf("updating nodes: %w", err)
	}
	if a.updateNode == nil {
		return c.fallback("updating nodes", a, "has no node update", func(f slurm.Client) error { return f.UpdateNodes(ctx, updates...) })
	}
	for _, u := range merged {
		body := nodeUpdate{State: nodeStates(u.State), Reason: u.Reason, Comment: u.Comment, Extra: u.Extra}
		if u.Addr != "" {
			body.Address = []string{u.Addr}
		}
		if u.Hostname != "" {
			body.Hostname = []string{u.Hostname}
		}
		var s send
		if len(u.Names) == 1 && !strings.ContainsAny(u.Names[0], "[],") {
			s = a.updateNode(u.Names[0], jsonBody(body))
		} else {
			body.Name = u.Names
			s = a.updateMany(jsonBody(body))
		}
		if _, err := c.call(ctx, s); err != nil {
			return fmt.Errorf("updating nodes %s: %w", strings.Join(u.Names, ","), err)
		}
	}
	return nil
}

// jobUpdate is the body of POST job/{id} burst sends.
type jobUpdate struct {
	Hold         *bool   `json:"hold,omitempty"`
	AdminComment *string `json:"admin_comment,omitempty"`
	BeginTime    any     `json:"begin_time,omitempty"`
}

func (c *Client) updateJob(ctx context.Context, a *api, id uint32, u jobUpdate) error {
	_, err := c.call(ctx, a.updateJob(idArg(id), jsonBody(u)))
	return err
}

// Requeue implements slurm.Client: GET job/{id}/requeue (v0.0.45, 26.05);
// earlier REST APIs have no requeue: the fallback does.
func (c *Client) Requeue(ctx context.Context, jobID uint32) error {
	a, err := c.apiOf(ctx)
	if err != nil {
		return fmt.Errorf("requeueing job %d: %w", jobID, err)
	}
	if a.requeue == nil {
		return c.fallback(fmt.Sprintf("requeueing job %d", jobID), a, "has no requeue (26.05's v0.0.45 has)",
			func(f slurm.Client) error { return f.Requeue(ctx, jobID) })
	}
	if _, err := c.call(ctx, a.requeue(idArg(jobID))); err != nil {
		return fmt.Errorf("requeueing job %d: %w", jobID, err)
	}
	return nil
}

// StartNow implements slurm.Client: POST job/{id} with begin_time now.
func (c *Client) StartNow(ctx context.Context, jobID uint32) error {
	a, err := c.apiOf(ctx)
	if err == nil {
		err = c.updateJob(ctx, a, jobID, jobUpdate{BeginTime: a.beginNow(time.Now())})
	}
	if err != nil {
		return fmt.Errorf("making job %d eligible now: %w", jobID, err)
	}
	return nil
}

// Hold implements slurm.Client: POST job/{id} with hold (and
// admin_comment: 22.05's REST API has none, so a hold with a reason goes
// to the fallback there).
func (c *Client) Hold(ctx context.Context, jobID uint32, reason string) error {
	if strings.ContainsAny(reason, "\r\n\x00") {
		return fmt.Errorf("holding job %d: reason %q has a newline or NUL", jobID, reason)
	}
	a, err := c.apiOf(ctx)
	if err != nil {
		return fmt.Errorf("holding job %d: %w", jobID, err)
	}
	hold := true
	u := jobUpdate{Hold: &hold}
	if reason != "" {
		if !a.adminComment {
			return c.fallback(fmt.Sprintf("holding job %d with a reason", jobID), a, "cannot set a job's admin comment",
				func(f slurm.Client) error { return f.Hold(ctx, jobID, reason) })
		}
		u.AdminComment = &reason
	}
	if err := c.updateJob(ctx, a, jobID, u); err != nil {
		return fmt.Errorf("holding job %d: %w", jobID, err)
	}
	return nil
}

// Release implements slurm.Client: POST job/{id} with hold false.
func (c *Client) Release(ctx context.Context, jobID uint32) error {
	a, err := c.apiOf(ctx)
	if err == nil {
		hold := false
		err = c.updateJob(ctx, a, jobID, jobUpdate{Hold: &hold})
	}
	if err != nil {
		return fmt.Errorf("releasing job %d: %w", jobID, err)
	}
	return nil
}

// Signal implements slurm.Client: DELETE job/{id}?signal=SIG (with
// flags=BATCH_JOB for the batch shell only; 22.05's REST API has no flags,
// so that goes to the fallback there).
func (c *Client) Signal(ctx context.Context, jobID uint32, sig string, batchOnly bool) error {
	sig = strings.TrimPrefix(strings.ToUpper(sig), "SIG")
	if sig == "" || len(sig) > 8 || strings.IndexFunc(sig, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') }) >= 0 {
		return fmt.Errorf("signalling job %d: signal %q: want a name like USR1 or TERM, or a number", jobID, sig)
	}
	a, err := c.apiOf(ctx)
	if err != nil {
		return fmt.Errorf("signalling job %d: %w", jobID, err)
	}
	s := a.signal(idArg(jobID), sig, batchOnly)
	if s == nil {
		return c.fallback(fmt.Sprintf("signalling the batch shell of job %d", jobID), a, "cannot signal only the batch shell",
			func(f slurm.Client) error { return f.Signal(ctx, jobID, sig, batchOnly) })
	}
	if _, err := c.call(ctx, s); err != nil {
		return fmt.Errorf("signalling job %d with %s: %w", jobID, sig, err)
	}
	return nil
}
