// Package imds is burst's one client of EC2 instance metadata (IMDSv2
// only, never the v1 fallback): the node bootstrap reads its user data, node
// tags and launch index through it, burst-agent its instance id, type and
// region, and its Poller watches for spot interruption notices and
// rebalance recommendations (parsed by ParseInstanceAction and
// ParseRebalance).
package imds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// InstanceAction is the spot/instance-action document: EC2 will Action the
// instance at Time (about two minutes after the notice).
type InstanceAction struct {
	Action string    // terminate, stop or hibernate
	Time   time.Time // UTC
}

// Rebalance is the events/recommendations/rebalance document: the instance
// is at elevated risk of interruption.
type Rebalance struct {
	NoticeTime time.Time
}

// ParseInstanceAction parses {"action": "terminate", "time": "2026-11-29T13:31:21Z"}.
// Both fields are required; action must be terminate, stop or hibernate.
func ParseInstanceAction(b []byte) (InstanceAction, error) {
	var doc struct {
		Action *string `json:"action"`
		Time   *string `json:"time"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return InstanceAction{}, fmt.Errorf("parsing spot/instance-action %q: %w", clip(b), err)
	}
	if doc.Action == nil || doc.Time == nil {
		return InstanceAction{}, fmt.Errorf("parsing spot/instance-action %q: want both \"action\" and \"time\"", clip(b))
	}
	switch *doc.Action {
	case "terminate", "stop", "hibernate":
	default:
		return InstanceAction{}, fmt.Errorf("parsing spot/instance-action: action %q is not terminate, stop or hibernate", *doc.Action)
	}
	t, err := time.Parse(time.RFC3339, *doc.Time)
	if err != nil {
		return InstanceAction{}, fmt.Errorf("parsing spot/instance-action: time %q is not RFC 3339: %w", *doc.Time, err)
	}
	return InstanceAction{Action: *doc.Action, Time: t.UTC()}, nil
}

// ParseRebalance parses {"noticeTime": "2026-11-29T13:29:21Z"}.
func ParseRebalance(b []byte) (Rebalance, error) {
	var doc struct {
		NoticeTime *string `json:"noticeTime"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return Rebalance{}, fmt.Errorf("parsing rebalance recommendation %q: %w", clip(b), err)
	}
	if doc.NoticeTime == nil {
		return Rebalance{}, fmt.Errorf("parsing rebalance recommendation %q: want \"noticeTime\"", clip(b))
	}
	t, err := time.Parse(time.RFC3339, *doc.NoticeTime)
	if err != nil {
		return Rebalance{}, fmt.Errorf("parsing rebalance recommendation: noticeTime %q is not RFC 3339: %w", *doc.NoticeTime, err)
	}
	return Rebalance{NoticeTime: t.UTC()}, nil
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// Options configure a Client.
type Options struct {
	// Endpoint overrides the IMDS address (default http://169.254.169.254).
	Endpoint string
	// Timeout bounds each HTTP attempt; default 1 s.
	Timeout time.Duration
	// Retry retries failed calls as the SDK does (the bootstrap, at the very
	// start of boot). Without it calls are not retried: the poller simply
	// tries again next interval, so a dead endpoint costs at most Timeout per
	// poll instead of the SDK's ~4 s.
	Retry bool
}

// Client reads instance metadata with IMDSv2 tokens.
type Client struct {
	c *imds.Client
}

// New returns a Client that requires IMDSv2 tokens (no IMDSv1 fallback).
func New(o Options) *Client {
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	so := imds.Options{
		Endpoint:              o.Endpoint,
		ClientEnableState:     imds.ClientEnabled,
		EnableFallback:        aws.FalseTernary,
		HTTPClient:            &http.Client{Timeout: o.Timeout},
		DisableDefaultTimeout: true,
	}
	if !o.Retry {
		so.Retryer = aws.NopRetryer{}
	}
	return &Client{c: imds.New(so)}
}

// SDK is the underlying aws-sdk-go-v2 client, for SDK parts that take one
// (the instance-role credential provider).
func (c *Client) SDK() *imds.Client { return c.c }

// maxDocument bounds a metadata document (user data has its own bound).
const maxDocument = 64 << 10

// Get returns the document at path (relative to /latest/meta-data/), or
// found=false on 404.
func (c *Client) Get(ctx context.Context, path string) ([]byte, bool, error) {
	out, err := c.c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		if notFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading instance metadata %s: %w", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(io.LimitReader(out.Content, maxDocument))
	if err != nil {
		return nil, false, fmt.Errorf("reading instance metadata %s: %w", path, err)
	}
	return b, true, nil
}

// UserData returns the instance's user data (at most max+1 bytes, so the
// caller can tell it is too large), or found=false when it has none.
func (c *Client) UserData(ctx context.Context, max int64) ([]byte, bool, error) {
	out, err := c.c.GetUserData(ctx, &imds.GetUserDataInput{})
	if err != nil {
		if notFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading user data from instance metadata: %w", err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(io.LimitReader(out.Content, max+1))
	if err != nil {
		return nil, false, fmt.Errorf("reading user data from instance metadata: %w", err)
	}
	return b, true, nil
}

func notFound(err error) bool {
	var st interface{ HTTPStatusCode() int }
	return errors.As(err, &st) && st.HTTPStatusCode() == http.StatusNotFound
}

// InstanceAction returns the spot interruption notice, if any.
func (c *Client) InstanceAction(ctx context.Context) (InstanceAction, bool, error) {
	b, ok, err := c.Get(ctx, "spot/instance-action")
	if err != nil || !ok {
		return InstanceAction{}, false, err
	}
	a, err := ParseInstanceAction(b)
	return a, err == nil, err
}

// Rebalance returns the rebalance recommendation, if any.
func (c *Client) Rebalance(ctx context.Context) (Rebalance, bool, error) {
	b, ok, err := c.Get(ctx, "events/recommendations/rebalance")
	if err != nil || !ok {
		return Rebalance{}, false, err
	}
	r, err := ParseRebalance(b)
	return r, err == nil, err
}

// InstanceID returns the instance id.
func (c *Client) InstanceID(ctx context.Context) (string, error) {
	b, ok, err := c.Get(ctx, "instance-id")
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if !ok || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("reading instance metadata instance-id: got %q, want an id starting with i-", clip(b))
	}
	return id, nil
}

// Notice is something the poller found.
type Notice struct {
	Rebalance      *Rebalance
	InstanceAction *InstanceAction
}

// Poller polls a Client every Interval (default 2 s) and calls Handle once
// for the first rebalance recommendation and once for the first instance
// action (EC2 repeats the same notice until the instance goes; it is acted
// on once). Handle runs on the polling goroutine: polling resumes when it
// returns.
type Poller struct {
	Client   *Client
	Interval time.Duration
	Handle   func(context.Context, Notice)
	Logger   *slog.Logger
}

// Run polls until ctx is done. Errors reading IMDS are logged (once per
// streak) and polling goes on.
func (p *Poller) Run(ctx context.Context) error {
	if p.Client == nil || p.Handle == nil {
		return errors.New("running IMDS poller: Client and Handle are required")
	}
	iv := p.Interval
	if iv == 0 {
		iv = 2 * time.Second
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	var sawRebalance, sawAction, failing bool
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		var errs []error
		if !sawAction {
			a, ok, err := p.Client.InstanceAction(ctx)
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				sawAction = true
				log.Warn("spot interruption notice", "action", a.Action, "time", a.Time)
				p.Handle(ctx, Notice{InstanceAction: &a})
			}
		}
		if !sawRebalance && !sawAction {
			r, ok, err := p.Client.Rebalance(ctx)
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				sawRebalance = true
				log.Warn("rebalance recommendation", "notice_time", r.NoticeTime)
				p.Handle(ctx, Notice{Rebalance: &r})
			}
		}
		if err := errors.Join(errs...); err != nil && ctx.Err() == nil {
			if !failing {
				log.Warn("polling instance metadata failed; will keep trying", "err", err)
			}
			failing = true
		} else if failing {
			log.Info("polling instance metadata recovered")
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// InstanceType returns the instance type (e.g. g5.xlarge).
func (c *Client) InstanceType(ctx context.Context) (string, error) {
	b, ok, err := c.Get(ctx, "instance-type")
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if !ok || t == "" || len(t) > 64 || strings.ContainsAny(t, " \n\t/") {
		return "", fmt.Errorf("reading instance metadata instance-type: got %q", clip(b))
	}
	return t, nil
}

// Identity is what burst reads from the instance identity document.
type Identity struct {
	InstanceID   string
	InstanceType string
	PendingTime  time.Time // when the instance last entered pending (launch or start)
}

// Identity reads the instance identity document
// (/latest/dynamic/instance-identity/document).
func (c *Client) Identity(ctx context.Context) (Identity, error) {
	out, err := c.c.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		return Identity{}, fmt.Errorf("reading the instance identity document: %w", err)
	}
	return Identity{InstanceID: out.InstanceID, InstanceType: out.InstanceType, PendingTime: out.PendingTime}, nil
}

// SignedIdentity returns the instance identity document and its signature of one
// kind ("rsa2048": PKCS #7 with the document attached; "signature": RSA over
// the document's SHA-256), from /latest/dynamic/instance-identity/. Only root
// on a burst node can read them: the node's IMDS firewall refuses every
// other user.
func (c *Client) SignedIdentity(ctx context.Context, kind string) (doc, sig []byte, err error) {
	read := func(p string) ([]byte, error) {
		out, err := c.c.GetDynamicData(ctx, &imds.GetDynamicDataInput{Path: "instance-identity/" + p})
		if err != nil {
			return nil, fmt.Errorf("reading instance-identity/%s from instance metadata: %w", p, err)
		}
		defer out.Content.Close()
		b, err := io.ReadAll(io.LimitReader(out.Content, maxDocument))
		if err != nil {
			return nil, fmt.Errorf("reading instance-identity/%s from instance metadata: %w", p, err)
		}
		return b, nil
	}
	if doc, err = read("document"); err != nil {
		return nil, nil, err
	}
	if sig, err = read(kind); err != nil {
		return nil, nil, err
	}
	return doc, sig, nil
}
