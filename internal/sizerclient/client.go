// Package sizerclient is a small Go client for the burst-sizer API, used by
// burst-resume and burst-suspend (rank with a short timeout, launch and
// terminate records), burst-sizer's own commands (route, report) and the
// tests; burst-agent posts its reports with agent/telemetry's sink, which keeps
// a rejected batch apart from a retryable one. Errors are typed so callers
// can fall back:
//
//   - errors.Is(err, ErrUnavailable): the sizer could not be reached, timed
//     out or failed (5xx): use the in-process policy / retry later;
//   - errors.Is(err, sizing.ErrOverBudget): the account is over budget:
//     launch nothing and hold the job with the error's message;
//   - errors.Is(err, sizing.ErrNoOffering): no offering of the class is
//     available (the same sentinels the in-process policy returns: the
//     sizer's API error code is mapped onto them);
//   - *APIError for every other refusal (bad request, auth, no offering),
//     with the server's Code and Message.
package sizerclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/tlspin"
	"github.com/burst-hpc/burst/internal/version"
)

// Sentinel errors.
var (
	ErrUnavailable  = errors.New("sizer unavailable")
	ErrUnauthorized = errors.New("sizer refused the credential")
	// ErrUntrusted: the server's certificate does not chain to the pinned
	// CA (also ErrUnavailable: callers fall back as for an outage).
	ErrUntrusted = errors.New("sizer certificate not signed by the pinned CA")
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

// Is maps codes onto the sentinels: this package's and the sizing policy's
// (sizing.ErrOverBudget, sizing.ErrNoOffering), one per condition.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrUnavailable:
		return e.Status >= 500
	case sizing.ErrOverBudget:
		return e.Code == sizerapi.CodeOverBudget
	case ErrUnauthorized:
		return e.Status == 401 || e.Status == 403
	case sizing.ErrNoOffering:
		return e.Code == sizerapi.CodeNoOffering
	}
	return false
}

// Client talks to one sizer, over HTTPS only, trusting only the sizer's
// CA (internal/tlspin). Safe for concurrent use.
type Client struct {
	base *url.URL
	// more are the other sizers (sizer.urls): a call the current one does
	// not answer goes to the next, which stays current while it answers.
	more    []*url.URL
	cur     atomic.Int32
	moreErr error
	token   string
	hc      *http.Client
	timeout time.Duration
	caFile  string
	caPEM   []byte
}

// Anonymous, as the token, sends no Authorization header (the identity
// exchange).
const Anonymous = "-"

// DefaultTimeout bounds each call unless WithTimeout or the context says otherwise.
const DefaultTimeout = 10 * time.Second

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets the per-call timeout (burst-resume uses a short one for rank).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithCAFile pins the sizer's CA certificate file (sizer.tls.ca_file).
func WithCAFile(path string) Option { return func(c *Client) { c.caFile = path } }

// WithCA pins the sizer's CA certificate (PEM).
func WithCA(pem []byte) Option { return func(c *Client) { c.caPEM = pem } }

// New makes a client for baseURL (e.g. "https://10.0.0.5:8472") with a
// bearer token (the admin token, a role's credential or a node's), pinning
// the CA of WithCAFile or WithCA. Plain http:// is refused.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("sizer URL %q is not https://host:port; set sizer.url in burst.yaml", baseURL)
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("sizer URL %q: the sizer is reached over https only", baseURL)
	}
	if token == "" {
		return nil, errors.New("sizer client: empty token; read it from sizer.token_file")
	}
	c := &Client{base: u, token: token, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.moreErr != nil {
		return nil, c.moreErr
	}
	switch {
	case c.caPEM != nil:
		if c.hc, err = tlspin.HTTPClient(c.caPEM, c.timeout); err != nil {
			return nil, err
		}
	case c.caFile != "":
		if c.hc, err = tlspin.LoadHTTPClient(c.caFile, c.timeout); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("sizer client: no CA to pin the sizer's certificate to; set sizer.tls.ca_file in burst.yaml")
	}
	return c, nil
}

// WithFallbackURLs adds sizers to try, in order, when the current one does
// not answer (several sizers on one PostgreSQL: sizer.urls).
func WithFallbackURLs(urls ...string) Option {
	return func(c *Client) {
		for _, raw := range urls {
			u, err := url.Parse(strings.TrimRight(raw, "/"))
			if err != nil || u.Host == "" || u.Scheme != "https" {
				c.moreErr = fmt.Errorf("sizer URL %q (sizer.urls) is not https://host:port", raw)
				return
			}
			c.more = append(c.more, u)
		}
	}
}

// bases are every sizer, the current one first.
func (c *Client) bases() []*url.URL {
	all := append([]*url.URL{c.base}, c.more...)
	k := int(c.cur.Load()) % len(all)
	out := make([]*url.URL, 0, len(all))
	return append(append(out, all[k:]...), all[:k]...)
}

// do calls the current sizer, and the others in turn while none answers
// (the API's writes are idempotent: a retried call that the first sizer
// did apply changes nothing twice).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.doWith(ctx, method, path, nil, in, out)
}

// doWith is do with extra request headers.
func (c *Client) doWith(ctx context.Context, method, path string, hdr http.Header, in, out any) error {
	if len(c.more) == 0 {
		return c.doAt(ctx, c.base, method, path, hdr, in, out)
	}
	all := c.bases()
	var errs []error
	for i, b := range all {
		err := c.doAt(ctx, b, method, path, hdr, in, out)
		var ae *APIError
		if err == nil || !(errors.Is(err, ErrUnavailable) || errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable) || ctx.Err() != nil {
			if i > 0 && err == nil {
				c.cur.Store(int32((int(c.cur.Load()) + i) % len(all)))
			}
			return err
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no sizer answered (%d tried): %w", len(all), errors.Join(errs...))
}

func (c *Client) doAt(ctx context.Context, base *url.URL, method, path string, hdr http.Header, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s request: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base.String()+path, body)
	if err != nil {
		return fmt.Errorf("building %s request: %w", path, err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set(sizerapi.HeaderVersion, version.Version)
	if c.token != Anonymous {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var cv *tls.CertificateVerificationError
		if errors.As(err, &cv) {
			return fmt.Errorf("calling sizer %s%s: %w: %w: %w (is sizer.tls.ca_file the CA of the sizer's certificate?)", base, path, ErrUnavailable, ErrUntrusted, err)
		}
		return fmt.Errorf("calling sizer %s%s: %w: %w", base, path, ErrUnavailable, err)
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
	return c.RouteAs(ctx, job, "")
}

// RouteAs asks for a submission-time decision, proving the submitting
// user with mungeCred (a MUNGE credential, used once; "" sends none).
func (c *Client) RouteAs(ctx context.Context, job sizerapi.JobRequest, mungeCred string) (sizing.Decision, error) {
	var out sizing.Decision
	var hdr http.Header
	if mungeCred != "" {
		hdr = http.Header{sizerapi.HeaderMunge: {mungeCred}}
	}
	err := c.doWith(ctx, http.MethodPost, sizerapi.PathRoute, hdr, sizerapi.RouteRequest{Job: job}, &out)
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

// NodeCredential exchanges an instance's signed identity document for its
// node credential (no bearer token is sent: the document is the proof).
func (c *Client) NodeCredential(ctx context.Context, rq sizerapi.CredentialRequest) (sizerapi.CredentialResponse, error) {
	var out sizerapi.CredentialResponse
	err := c.do(ctx, http.MethodPost, sizerapi.PathNodeCredential, rq, &out)
	return out, err
}

// RenewCredential renews the node credential the client was made with.
func (c *Client) RenewCredential(ctx context.Context) (sizerapi.CredentialResponse, error) {
	var out sizerapi.CredentialResponse
	err := c.do(ctx, http.MethodPost, sizerapi.PathNodeRenew, struct{}{}, &out)
	return out, err
}

// UsageReport returns the monthly usage report.
func (c *Client) UsageReport(ctx context.Context) (sizerapi.UsageReport, error) {
	var out sizerapi.UsageReport
	err := c.do(ctx, http.MethodGet, sizerapi.PathReport, nil, &out)
	return out, err
}

// TerminatedEvent records a termination with its source and EC2 reason.
func (c *Client) TerminatedEvent(ctx context.Context, ev sizerapi.InstanceEvent) error {
	return c.do(ctx, http.MethodPost, sizerapi.PathInstanceTerminate, ev, nil)
}

// Intent records a launch intent (journaled before CreateFleet).
func (c *Client) Intent(ctx context.Context, in sizerapi.LaunchIntent) error {
	return c.do(ctx, http.MethodPost, sizerapi.PathInstanceIntent, in, nil)
}

// Run records a job's start or end on its nodes.
func (c *Client) Run(ctx context.Context, run sizerapi.JobRun) error {
	return c.do(ctx, http.MethodPost, sizerapi.PathJobRun, run, nil)
}

// Spend returns an account's spend this month (admission control).
func (c *Client) Spend(ctx context.Context, account string) (sizerapi.AccountSpend, error) {
	var out sizerapi.AccountSpend
	err := c.do(ctx, http.MethodGet, sizerapi.PathSpend+"?account="+url.QueryEscape(account), nil, &out)
	return out, err
}

// Ledger returns every instance's bill this month and its charges.
func (c *Client) Ledger(ctx context.Context) (sizerapi.Ledger, error) {
	var out sizerapi.Ledger
	err := c.do(ctx, http.MethodGet, sizerapi.PathLedger, nil, &out)
	return out, err
}

// LedgerSync runs a ledger pass against EC2 now.
func (c *Client) LedgerSync(ctx context.Context) (sizerapi.LedgerSync, error) {
	var out sizerapi.LedgerSync
	err := c.do(ctx, http.MethodPost, sizerapi.PathLedgerSync, nil, &out)
	return out, err
}
