package rest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/burst-hpc/burst/internal/slurm"
)

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
