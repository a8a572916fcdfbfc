package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
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
