package rest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

// Options configure New.
type Options struct {
	// URL is slurmrestd's address: https://host:port (verified against
	// CAFile) or unix:/path/to/slurmrestd.socket. Every request carries a
	// SlurmUser token: http:// is refused unless InsecureLoopback and the
	// host is a loopback IP.
	URL string
	// CAFile is the PEM file of the CAs trusted for an https:// URL (and
	// nothing else: not the system roots). Required with https://.
	CAFile string
	// InsecureLoopback allows http:// to a loopback IP (127.0.0.1, ::1).
	InsecureLoopback bool
	// User is the X-SLURM-USER-NAME of every request and the "sun" of the
	// tokens minted from JWTKeyFile. burst updates nodes and requeues other
	// users' jobs: SlurmUser or root (or a Slurm operator/administrator).
	// With TokenFile, "" takes the token's own sun claim.
	User string
	// JWTKeyFile is the HS256 key of slurm.conf's
	// AuthAltParameters=jwt_key=...: burst mints short-lived tokens
	// (TokenLifetime) from it. Readable by root or SlurmUser only.
	JWTKeyFile string
	// TokenFile holds a token someone else renews (`scontrol token
	// username=... lifespan=...`, a token service), re-read when it
	// changes. Exactly one of JWTKeyFile and TokenFile.
	TokenFile string
	// TokenLifetime of the minted tokens; default DefaultTokenLifetime.
	TokenLifetime time.Duration
	// Timeout bounds each request; default 30 s.
	Timeout time.Duration
	// Fallback, when set, does what this release's REST API cannot (see
	// the package doc), typically the command-line client; without it
	// those operations fail with slurm.ErrUnsupported.
	Fallback slurm.Client
	// DataVersion skips the detection ("v0.0.42"); default: detect.
	DataVersion string
	// Logger logs each request at debug level (never a credential);
	// default slog.Default().
	Logger *slog.Logger
	// Observe, when set, is called after each request (benchmarks count
	// calls and bytes with it): Name "slurmrestd", Args {method, path}.
	Observe func(slurm.Call)
	// Transport replaces the HTTP transport (tests).
	Transport http.RoundTripper
	// Detections caches the detected data version; default: the
	// process's, shared by every client.
	Detections *Detections
}

// Client implements slurm.Client over slurmrestd.
type Client struct {
	o      Options
	server string // base URL the generated clients prefix
	hc     *http.Client
	creds  credentials
	log    *slog.Logger

	detectMu sync.Mutex
	api      *api

	fellBack sync.Map // operation -> logged once
}

var _ slurm.Client = (*Client)(nil)

// New checks the options and the credential (the key's or token file's
// mode, the token's form) and returns a client; it does not contact
// slurmrestd (the first request detects its data version).
func New(o Options) (*Client, error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Client{o: o, log: o.Logger}
	server, transport, err := dialer(o.URL, o.CAFile, o.InsecureLoopback)
	if err != nil {
		return nil, err
	}
	if o.Transport != nil {
		transport = o.Transport
	}
	c.server = server
	c.hc = &http.Client{Transport: transport, Timeout: o.Timeout,
		// slurmrestd never redirects; a redirect would carry the token elsewhere
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	switch {
	case o.JWTKeyFile != "" && o.TokenFile != "":
		return nil, errors.New("slurmrestd client: give a JWT key file or a token file, not both")
	case o.JWTKeyFile != "":
		c.creds, err = newMinted(o.JWTKeyFile, o.User, o.TokenLifetime)
	case o.TokenFile != "":
		c.creds, err = newTokenFile(o.TokenFile, o.User)
	default:
		return nil, errors.New("slurmrestd client: no credential: give a JWT key file (burst mints tokens) or a token file (scontrol token)")
	}
	if err != nil {
		return nil, fmt.Errorf("slurmrestd client: %w", err)
	}
	if o.DataVersion != "" {
		a, err := c.apiFor(o.DataVersion)
		if err != nil {
			return nil, err
		}
		c.api = a
	}
	return c, nil
}

// dialer maps the URL to the base the generated clients use and a
// transport: the socket for unix:/path, TLS trusting only caFile's CAs for
// https, TCP for http to a loopback IP when insecureLoopback.
func dialer(raw, caFile string, insecureLoopback bool) (string, http.RoundTripper, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 4
	if path, ok := strings.CutPrefix(raw, "unix:"); ok {
		if !filepath.IsAbs(path) {
			return "", nil, fmt.Errorf("slurmrestd URL %q: want unix:/absolute/path/to/socket", raw)
		}
		base.Proxy = nil
		base.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		return "http://slurmrestd", base, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", nil, fmt.Errorf("slurmrestd URL %q: want https://host:port or unix:/path/to/socket", raw)
	}
	switch u.Scheme {
	case "https":
		if caFile == "" {
			return "", nil, fmt.Errorf("slurmrestd URL %q: https needs the CA file that signed slurmrestd's certificate (slurm.rest.ca_file); the system roots are not trusted", raw)
		}
		tc, err := loadCA(caFile)
		if err != nil {
			return "", nil, err
		}
		base.TLSClientConfig = tc
	case "http":
		if !isLoopbackIP(u.Host) {
			return "", nil, fmt.Errorf("slurmrestd URL %q: plain HTTP would carry a SlurmUser token in clear text across the network; use https://host:port with a CA file or unix:/path/to/socket", raw)
		}
		if !insecureLoopback {
			return "", nil, fmt.Errorf("slurmrestd URL %q: plain HTTP to a loopback address needs insecure_loopback (slurm.rest.insecure_loopback: true); or use https with a CA file or a unix socket", raw)
		}
		base.Proxy = nil // a proxy would take the token off this host
	}
	return u.Scheme + "://" + u.Host, base, nil
}

// loadCA is a TLS client configuration trusting exactly the certificates
// of the PEM file at path, TLS 1.2 or later.
func loadCA(path string) (*tls.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading slurmrestd's CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("slurmrestd's CA file %s: no PEM CERTIFICATE block", path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// isLoopbackIP reports whether hostport names a loopback IP literally (a
// name such as localhost is not trusted to resolve to one).
func isLoopbackIP(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// doer is the generated clients' HttpRequestDoer: it adds the credential.
type doer struct{ c *Client }

func (d doer) Do(req *http.Request) (*http.Response, error) {
	user, tok, err := d.c.creds.token(time.Now())
	if err != nil {
		return nil, err
	}
	req.Header.Set(headerUser, user)
	req.Header.Set(headerToken, tok)
	req.Header.Set("Accept", "application/json")
	return d.c.hc.Do(req)
}

// maxBody caps an answer (the same bound as the CLI's JSON).
const maxBody = slurm.MaxJSONSize

// answer is a slurmrestd answer that came back.
type answer struct {
	method, path string
	status       int
	body         []byte
}

// call runs one request (send builds and sends it through a generated
// client) and returns the answer when the status is 2xx and Slurm reported
// no problem; else an *APIError.
func (c *Client) call(ctx context.Context, send func(context.Context) (*http.Response, error)) (*answer, error) {
	t0 := time.Now()
	resp, err := send(ctx)
	var a answer
	if resp != nil {
		a.method, a.path, a.status = resp.Request.Method, resp.Request.URL.Path, resp.StatusCode
		var rerr error
		a.body, rerr = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		resp.Body.Close()
		if rerr != nil && err == nil {
			err = fmt.Errorf("reading the answer of slurmrestd %s %s: %w", a.method, a.path, rerr)
		}
		if len(a.body) > maxBody {
			err = fmt.Errorf("slurmrestd %s %s: answer larger than %d bytes", a.method, a.path, maxBody)
		}
	}
	took := time.Since(t0)
	if err == nil {
		err = a.check()
	}
	c.log.Debug("slurmrestd request", "method", a.method, "path", a.path, "status", a.status, "bytes", len(a.body), "took", took, "err", err)
	if c.o.Observe != nil {
		c.o.Observe(slurm.Call{Name: "slurmrestd", Args: []string{a.method, a.path}, Stdout: len(a.body), Took: took, Err: err})
	}
	if err != nil {
		if resp == nil {
			// the request did not get through (refused, timed out, credential)
			return nil, fmt.Errorf("calling slurmrestd at %s: %w", c.o.URL, err)
		}
		return nil, err
	}
	return &a, nil
}

// check turns a refusal into an *APIError: a non-2xx status, Slurm's
// errors, a warning that burst's request was not applied as sent.
func (a *answer) check() error {
	probs, _, isJSON := problems(a.body)
	if a.status/100 == 2 && len(probs) == 0 {
		return nil
	}
	e := &APIError{Method: a.method, Endpoint: a.path, Status: a.status, Problems: probs}
	if !isJSON {
		e.Body = strings.TrimSpace(string(a.body[:min(len(a.body), 200)]))
	}
	return e
}

// decode runs a parser on an answer, naming the endpoint in its error.
func decode[T any](a *answer, parse func([]byte) (T, error)) (T, error) {
	v, err := parse(a.body)
	if err != nil {
		return v, fmt.Errorf("reading the answer of slurmrestd %s %s: %w", a.method, a.path, err)
	}
	return v, nil
}

// fallback runs op through Options.Fallback, saying once per operation
// why; without a fallback it returns what, wrapping slurm.ErrUnsupported.
func (c *Client) fallback(op string, a *api, why string, run func(slurm.Client) error) error {
	if c.o.Fallback == nil {
		return fmt.Errorf("%s: %w: slurmrestd %s (Slurm %s) %s; configure the command-line fallback (slurm.rest.fallback: cli) or use slurm.api: cli",
			op, slurm.ErrUnsupported, a.version, a.release, why)
	}
	if _, seen := c.fellBack.LoadOrStore(op, true); !seen {
		c.log.Info("using the Slurm command line for what slurmrestd cannot do", "operation", op, "data_version", a.version, "slurm", a.release, "why", why)
	}
	return run(c.o.Fallback)
}

// jsonBody marshals a request body.
func jsonBody(v any) io.Reader {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // burst's own request types always marshal
	return &b
}
