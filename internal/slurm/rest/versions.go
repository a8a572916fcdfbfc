package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/rest/v0038"
	"github.com/burst-hpc/burst/internal/slurm/rest/v0042"
	"github.com/burst-hpc/burst/internal/slurm/rest/v0045"
)

// send is one request through a generated client.
type send = func(context.Context) (*http.Response, error)

// api is one data version's endpoints, built on its generated client: the
// only per-version code. What a version lacks is nil; its answers are read
// by the shapes' one decoder each (internal/slurm), whatever the version.
type api struct {
	version string // "v0.0.42"
	release string // Slurm's, from the detecting ping ("24.11.5")

	ping       func() send
	job        func(id string) send
	jobs       func() send
	jobStates  func() send // GET jobs/state/ (24.05+): every job's ID and state; nil before
	node       func(name string) send
	nodes      func() send
	updateNode func(name string, body io.Reader) send    // nil on v0.0.38 (22.05 cannot update nodes over REST)
	updateMany func(body io.Reader) send                 // POST nodes/ with "name": [...]
	updateJob  func(id string, body io.Reader) send      // hold, release, begin time
	signal     func(id, sig string, batchOnly bool) send // batchOnly: nil result where unsupported
	requeue    func(id string) send                      // nil before v0.0.45 (26.05)

	// beginNow is the begin_time that makes a job eligible now.
	beginNow func(now time.Time) any
	// adminComment: the job update takes admin_comment (not v0.0.38).
	adminComment bool
}

const jsonType = "application/json"

// dataVersions are the versions burst speaks, newest first: what it probes
// for, and prefers when a slurmrestd serves several.
var dataVersions = []string{"v0.0.45", "v0.0.42", "v0.0.38"}

// noVal is data_parser's {set, number} form (v0.0.40+).
type noVal struct {
	Set    bool  `json:"set"`
	Number int64 `json:"number"`
}

// apiBuilders make each data version's api over its generated client.
var apiBuilders = map[string]func(server string, d doer) (*api, error){
	"v0.0.38": api0038,
	"v0.0.42": api0042,
	"v0.0.45": api0045,
}

func (c *Client) apiFor(version string) (*api, error) {
	if b, ok := apiBuilders[version]; ok {
		return b(c.server, doer{c})
	}
	return nil, fmt.Errorf("slurmrestd data version %q: burst speaks %v", version, dataVersions)
}

// api0038 is the api of data version v0.0.38.
func api0038(server string, d doer) (*api, error) {
	g, err := v0038.NewClient(server, v0038.WithHTTPClient(d))
	if err != nil {
		return nil, err
	}
	return &api{
		version: "v0.0.38",
		ping:    func() send { return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0038Ping(ctx) } },
		job: func(id string) send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0038GetJob(ctx, id) }
		},
		jobs: func() send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0038GetJobs(ctx, nil) }
		},
		node: func(name string) send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0038GetNode(ctx, name) }
		},
		nodes: func() send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0038GetNodes(ctx, nil) }
		},
		updateJob: func(id string, body io.Reader) send {
			return func(ctx context.Context) (*http.Response, error) {
				return g.SlurmV0038UpdateJobWithBody(ctx, id, jsonType, body)
			}
		},
		signal: func(id, sig string, batchOnly bool) send {
			if batchOnly {
				return nil // v0.0.38 has no flags: it would signal every step
			}
			s := v0038.V0038Signal(sig)
			return func(ctx context.Context) (*http.Response, error) {
				return g.SlurmV0038CancelJob(ctx, id, &v0038.SlurmV0038CancelJobParams{Signal: &s})
			}
		},
		// 22.05 reads begin_time as sbatch --begin does
		beginNow: func(time.Time) any { return "now" },
	}, nil
}

// api0042 is the api of data version v0.0.42.
func api0042(server string, d doer) (*api, error) {
	g, err := v0042.NewClient(server, v0042.WithHTTPClient(d))
	if err != nil {
		return nil, err
	}
	return &api{
		version: "v0.0.42",
		ping: func() send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0042GetPing(ctx) }
		},
		job: func(id string) send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0042GetJob(ctx, id, nil) }
		},
		jobs: func() send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0042GetJobs(ctx, nil) }
		},
		jobStates: func() send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0042GetJobsState(ctx, nil) }
		},
		node: func(name string) send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0042GetNode(ctx, name, nil) }
		},
		nodes: func() send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0042GetNodes(ctx, nil) }
		},
		updateNode: func(name string, body io.Reader) send {
			return func(ctx context.Context) (*http.Response, error) {
				return g.SlurmV0042PostNodeWithBody(ctx, name, jsonType, body)
			}
		},
		updateMany: func(body io.Reader) send {
			return func(ctx context.Context) (*http.Response, error) {
				return g.SlurmV0042PostNodesWithBody(ctx, jsonType, body)
			}
		},
		updateJob: func(id string, body io.Reader) send {
			return func(ctx context.Context) (*http.Response, error) {
				return g.SlurmV0042PostJobWithBody(ctx, id, jsonType, body)
			}
		},
		signal: func(id, sig string, batchOnly bool) send {
			p := &v0042.SlurmV0042DeleteJobParams{Signal: &sig}
			if batchOnly {
				f := v0042.BATCHJOB
				p.Flags = &f
			}
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0042DeleteJob(ctx, id, p) }
		},
		beginNow:     func(now time.Time) any { return noVal{Set: true, Number: now.Unix()} },
		adminComment: true,
	}, nil
}

// api0045 is the api of data version v0.0.45.
func api0045(server string, d doer) (*api, error) {
	g, err := v0045.NewClient(server, v0045.WithHTTPClient(d))
	if err != nil {
		return nil, err
	}
	return &api{
		version: "v0.0.45",
		ping: func() send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0045GetPing(ctx) }
		},
		job: func(id string) send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0045GetJob(ctx, id, nil) }
		},
		jobs: func() send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0045GetJobs(ctx, nil) }
		},
		jobStates: func() send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0045GetJobsState(ctx, nil) }
		},
		node: func(name string) send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0045GetNode(ctx, name, nil) }
		},
		nodes: func() send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0045GetNodes(ctx, nil) }
		},
		updateNode: func(name string, body io.Reader) send {
			return func(ctx context.Context) (*http.Response, error) {
				return g.SlurmV0045PostNodeWithBody(ctx, name, jsonType, body)
			}
		},
		updateMany: func(body io.Reader) send {
			return func(ctx context.Context) (*http.Response, error) {
				return g.SlurmV0045PostNodesWithBody(ctx, jsonType, body)
			}
		},
		updateJob: func(id string, body io.Reader) send {
			return func(ctx context.Context) (*http.Response, error) {
				return g.SlurmV0045PostJobWithBody(ctx, id, jsonType, body)
			}
		},
		signal: func(id, sig string, batchOnly bool) send {
			p := &v0045.SlurmV0045DeleteJobParams{Signal: &sig}
			if batchOnly {
				f := v0045.SlurmV0045DeleteJobParamsFlagsBATCHJOB
				p.Flags = &f
			}
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0045DeleteJob(ctx, id, p) }
		},
		requeue: func(id string) send {
			return func(ctx context.Context) (*http.Response, error) { return g.SlurmV0045GetJobRequeue(ctx, id, nil) }
		},
		beginNow:     func(now time.Time) any { return noVal{Set: true, Number: now.Unix()} },
		adminComment: true,
	}, nil
}

// Detections caches the data version detected per slurmrestd URL. Clients
// share the process's (burst-resume and the prolog are short-lived: one
// probe each) unless Options.Detections gives one of their own (a
// benchmark counting each hook's detection, as a new process makes it).
type Detections struct{ m sync.Map } // URL -> detection

var processDetections Detections

func (c *Client) detections() *Detections {
	if c.o.Detections != nil {
		return c.o.Detections
	}
	return &processDetections
}

type detection struct{ version, release string }

// apiOf returns the client's api, detecting the data version on first use:
// GET /slurm/<version>/ping for each of dataVersions, newest first, until
// one answers (slurmrestd answers 404 for a data parser it does not load).
// The ping's meta names the Slurm release.
func (c *Client) apiOf(ctx context.Context) (*api, error) {
	c.detectMu.Lock()
	defer c.detectMu.Unlock()
	if c.api != nil {
		return c.api, nil
	}
	if d, ok := c.detections().m.Load(c.o.URL); ok {
		d := d.(detection)
		a, err := c.apiFor(d.version)
		if err != nil {
			return nil, err
		}
		a.release, c.api = d.release, a
		return a, nil
	}
	var tried []string
	for _, v := range dataVersions {
		a, err := c.apiFor(v)
		if err != nil {
			return nil, err
		}
		ans, err := c.call(ctx, a.ping())
		var ae *APIError
		if errors.As(err, &ae) && errors.Is(err, slurm.ErrUnsupported) {
			tried = append(tried, v)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("detecting slurmrestd's data version: %w", err)
		}
		rel, err := pingRelease(ans.body)
		if err != nil {
			return nil, fmt.Errorf("detecting slurmrestd's data version: %s %s: %w", ans.method, ans.path, err)
		}
		sv, err := slurm.ParseVersion(rel)
		if err != nil {
			return nil, fmt.Errorf("detecting slurmrestd's data version: %w", err)
		}
		if !sv.AtLeast(22, 5) {
			return nil, &slurm.VersionError{Version: sv, Bin: c.o.URL}
		}
		a.release = rel
		c.api = a
		c.detections().m.Store(c.o.URL, detection{v, rel})
		c.log.Info("slurmrestd", "url", c.o.URL, "data_version", v, "slurm", rel)
		return a, nil
	}
	return nil, fmt.Errorf("slurmrestd at %s serves none of the data versions burst speaks (tried %v: HTTP 404): load one with slurmrestd -d data_parser/v0.0.42 (24.11 to 25.11), v0.0.45 (26.05+) or -s openapi/v0.0.38 (22.05)", c.o.URL, tried)
}

// pingRelease reads the Slurm release from a ping's meta (v0.0.38:
// meta.Slurm, later meta.slurm; encoding/json matches either).
func pingRelease(b []byte) (string, error) {
	var d struct {
		Meta struct {
			Slurm struct {
				Release string `json:"release"`
			} `json:"slurm"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return "", fmt.Errorf("not JSON: %w", err)
	}
	if d.Meta.Slurm.Release == "" {
		return "", errors.New("no meta.slurm.release")
	}
	return d.Meta.Slurm.Release, nil
}

func idArg(id uint32) string { return strconv.FormatUint(uint64(id), 10) }
