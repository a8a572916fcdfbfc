// Package sizerclient is a small Go client for the burst-sizer API, used by
// burst-resume and burst-suspend (rank with a short timeout, launch and
// terminate records), burst-sizer's own commands (route, report) and the
// tests; burst-agent posts its reports with agent/report's sink, which keeps
// a rejected batch apart from a retryable one. Errors are typed so callers
// can fall back:
//
//   - errors.Is(err, ErrUnavailable): the sizer could not be reached, timed
//     out or failed (5xx): use the in-process policy / retry later;
//   - errors.Is(err, ErrOverBudget): the account is over budget: launch
//     nothing and hold the job with the error's message;
//   - *APIError for every other refusal (bad request, auth, no offering),
//     with the server's Code and Message.
package sizerclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
)

// Sentinel errors.
var (
	ErrUnavailable  = errors.New("sizer unavailable")
	ErrOverBudget   = errors.New("account over budget")
	ErrUnauthorized = errors.New("sizer refused the credential")
	ErrNoOffering   = errors.New("sizer has no offering")
)

// APIError is a non-2xx answer from the sizer.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("sizer answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Is maps codes onto the sentinels.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrUnavailable:
		return e.Status >= 500
	case ErrOverBudget:
		return e.Code == sizerapi.CodeOverBudget
	case ErrUnauthorized:
		return e.Status == 401 || e.Status == 403
	case ErrNoOffering:
		return e.Code == sizerapi.CodeNoOffering
	}
	return false
}

// Client talks to one sizer. Safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// DefaultTimeout bounds each call unless WithTimeout or the context says otherwise.
const DefaultTimeout = 10 * time.Second

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets the per-call timeout (burst-resume uses a short one for rank).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.hc.Timeout = d } }

// WithHTTPClient replaces the HTTP client.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New makes a client for baseURL (e.g. "http://10.0.0.5:8470") with a bearer
// token (the admin token, or a node credential from NodeToken).
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sizer URL %q is not http(s)://host:port; set sizer.url in burst.yaml", baseURL)
	}
	if token == "" {
		return nil, errors.New("sizer client: empty token; read it from sizer.token_file")
	}
	c := &Client{base: u, token: token, hc: &http.Client{Timeout: DefaultTimeout}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s request: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return fmt.Errorf("building %s request: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("calling sizer %s%s: %w: %w", c.base, path, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var er sizerapi.ErrorResponse
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(raw, &er) != nil || er.Code == "" {
			er = sizerapi.ErrorResponse{Code: http.StatusText(resp.StatusCode), Message: strings.TrimSpace(string(raw))}
		}
		return &APIError{Status: resp.StatusCode, Code: er.Code, Message: er.Message}
	}
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding sizer %s answer: %w: %w", path, ErrUnavailable, err)
	}
	return nil
}

// Rank asks for a class's offerings for a job, best first.
func (c *Client) Rank(ctx context.Context, rq sizerapi.RankRequest) (sizerapi.RankResponse, error) {
	var out sizerapi.RankResponse
	err := c.do(ctx, http.MethodPost, sizerapi.PathRank, rq, &out)
	return out, err
}

// Route asks for a submission-time decision.
func (c *Client) Route(ctx context.Context, job sizerapi.JobRequest) (sizing.Decision, error) {
	var out sizing.Decision
	err := c.do(ctx, http.MethodPost, sizerapi.PathRoute, sizerapi.RouteRequest{Job: job}, &out)
	return out, err
}

// Report sends an agent batch. Batches are idempotent by (node, seq):
// resending after an error is safe.
func (c *Client) Report(ctx context.Context, b sizerapi.ReportBatch) (sizerapi.ReportResult, error) {
	var out sizerapi.ReportResult
	err := c.do(ctx, http.MethodPost, sizerapi.PathReports, b, &out)
	return out, err
}

// Interruption records a spot interruption notice.
func (c *Client) Interruption(ctx context.Context, in sizerapi.Interruption) error {
	return c.do(ctx, http.MethodPost, sizerapi.PathInterruptions, in, nil)
}

// Boot posts a node's boot report (node credential or admin token).
func (c *Client) Boot(ctx context.Context, b sizerapi.BootReport) error {
	return c.do(ctx, http.MethodPost, sizerapi.PathBoots, b, nil)
}

// Launched records an instance launch (spend starts).
func (c *Client) Launched(ctx context.Context, ev sizerapi.InstanceEvent) error {
	return c.do(ctx, http.MethodPost, sizerapi.PathInstanceLaunch, ev, nil)
}

// Terminated records an instance termination (spend stops).
func (c *Client) Terminated(ctx context.Context, instanceID string, at time.Time) error {
	return c.do(ctx, http.MethodPost, sizerapi.PathInstanceTerminate, sizerapi.InstanceEvent{InstanceID: instanceID, Time: at}, nil)
}

// Budgets returns every account's month so far.
func (c *Client) Budgets(ctx context.Context) ([]sizerapi.BudgetStatus, error) {
	var out []sizerapi.BudgetStatus
	err := c.do(ctx, http.MethodGet, sizerapi.PathBudgets, nil, &out)
	return out, err
}

// UsageReport returns the monthly usage report.
func (c *Client) UsageReport(ctx context.Context) (sizerapi.UsageReport, error) {
	var out sizerapi.UsageReport
	err := c.do(ctx, http.MethodGet, sizerapi.PathReport, nil, &out)
	return out, err
}
