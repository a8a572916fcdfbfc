// Package auth holds burst-sizer's credentials. The root secret is the
// admin bearer token (a 0600 file on the head node). Every other credential
// is derived from it with HMAC-SHA256 under a key of its own kind (domain
// separation: a MAC minted for one kind never verifies as another):
//
//	kind       form                                          authorises
//	admin      the token itself                              everything
//	route      br2:<mac>                                     POST /v1/route (submit-time decisions)
//	read-only  bro2:<mac>                                    GET /metrics, /v1/budgets, /v1/report
//	node       bn2:<instance>:<node>:<expiry>:<mac>          its own node's reports and interruptions
//	account    ba3:<account>:<expiry>:<generation>:<mac>     one Slurm account's dashboard and read-only views
//
// A node credential is issued by burst-sizer serve only in exchange for the
// instance's signed identity document (see sizer/server), names one EC2
// instance and its Slurm node, and expires (unix seconds); the sizer also
// refuses it once it knows the instance ended. It is never in user data.
//
// An account credential expires too (`burst-sizer token account --valid-for`,
// default 90 days) and is revoked early by rotation: `--rotate` raises the
// account's generation in <token_file>.accounts (RotationFile), and every
// credential of an older generation is refused from then on.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MinTokenLen is the shortest admin token accepted.
const MinTokenLen = 32

// Credential prefixes, one per kind and version.
const (
	NodePrefix     = "bn2:"
	RoutePrefix    = "br2:"
	ReadOnlyPrefix = "bro2:"
	AccountPrefix  = "ba3:"
	// retired forms: refused with a message saying so
	oldNodePrefix     = "bn1:"
	oldRoutePrefix    = "br1:"
	oldAccountPrefix  = "ba1:"
	oldAccountPrefix2 = "ba2:" // never expired
)

// Kind names a credential kind; each has its own derived HMAC key.
type Kind string

// The derived credential kinds.
const (
	KindNode     Kind = "node"
	KindRoute    Kind = "route"
	KindReadOnly Kind = "read-only"
	KindAccount  Kind = "account"
)

// derivedKey is the HMAC key of one credential kind.
func derivedKey(admin string, k Kind) []byte {
	m := hmac.New(sha256.New, []byte(admin))
	m.Write([]byte("burst-sizer credential key v2\x00" + string(k)))
	return m.Sum(nil)
}

func mac(admin string, k Kind, fields ...string) string {
	m := hmac.New(sha256.New, derivedKey(admin, k))
	m.Write([]byte(strings.Join(fields, "\x00")))
	return hex.EncodeToString(m.Sum(nil))
}

// LoadCredential reads any credential (admin, node, route or read-only)
// from the first line of path, without the admin token's permission check
// (the route credential file is meant to be world-readable).
func LoadCredential(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading sizer credential: %w", err)
	}
	tok, err := ParseCredentialFile(b)
	if err != nil {
		return "", fmt.Errorf("reading sizer credential %s: %w", path, err)
	}
	return tok, nil
}

// maxCredentialFile bounds a credential file.
const maxCredentialFile = 4096

// credChars are the characters of every credential burst writes.
var credChars = regexp.MustCompile(`^[A-Za-z0-9._~+/=:-]+$`)

// ParseCredentialFile returns the credential on the first line of a
// credential file's content: trimmed, non-empty, printable token characters
// only, the file at most 4 KiB.
func ParseCredentialFile(b []byte) (string, error) {
	if len(b) > maxCredentialFile {
		return "", fmt.Errorf("%d bytes, a credential file holds at most %d", len(b), maxCredentialFile)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSpace(tok)
	switch {
	case tok == "":
		return "", errors.New("empty (no credential on the first line)")
	case !credChars.MatchString(tok):
		return "", errors.New("the first line holds characters no credential has")
	}
	return tok, nil
}

// LoadToken reads the admin token: the first line of path, which must not be
// readable or writable by group or others.
func LoadToken(path string) (string, error) {
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("reading sizer token: %w; create it with `burst-sizer token init %s`", err, path)
	}
	if err := CheckPrivate(path); err != nil {
		return "", fmt.Errorf("reading sizer token: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading sizer token: %w", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSpace(tok)
	if len(tok) < MinTokenLen {
		return "", fmt.Errorf("reading sizer token: %s holds %d characters, want at least %d; regenerate it with `burst-sizer token init --force %s`", path, len(tok), MinTokenLen, path)
	}
	if derivedForm(tok) {
		return "", fmt.Errorf("reading sizer token: %s holds a node, route, read-only or account credential, not the admin token", path)
	}
	return tok, nil
}

func derivedForm(tok string) bool {
	for _, p := range []string{NodePrefix, RoutePrefix, ReadOnlyPrefix, AccountPrefix, oldNodePrefix, oldRoutePrefix, oldAccountPrefix} {
		if strings.HasPrefix(tok, p) {
			return true
		}
	}
	return false
}

// Generate returns a new random admin token (64 hex characters).
func Generate() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// WriteNew writes a new admin token to path with mode 0600. Unless force is
// set an existing file is an error.
func WriteNew(path string, force bool) (string, error) {
	tok, err := Generate()
	if err != nil {
		return "", err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return "", fmt.Errorf("writing sizer token: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return "", fmt.Errorf("writing sizer token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("writing sizer token: %w", err)
	}
	return tok, f.Close()
}

// RouteToken is the submit-time credential: it only authorises /v1/route
// (read-only decisions), so it may be readable by every user who submits
// jobs (burst-sizer route runs as the submitting user inside sbatch's
// cli_filter).
func RouteToken(admin string) string { return RoutePrefix + mac(admin, KindRoute, "route") }

// ReadOnlyToken authorises the read-only endpoints (metrics, budgets, the
// usage report): for a Prometheus scraper or a dashboard, never the admin
// token.
func ReadOnlyToken(admin string) string {
	return ReadOnlyPrefix + mac(admin, KindReadOnly, "read-only")
}

// NodeClaims is what a node credential says: which instance, which Slurm
// node, until when.
type NodeClaims struct {
	InstanceID string
	Node       string
	Expires    time.Time // whole seconds
}

var (
	instanceRE = regexp.MustCompile(`^i-[0-9a-f]{8,32}$`)
	nodeRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
)

func (c NodeClaims) check() error {
	switch {
	case !instanceRE.MatchString(c.InstanceID):
		return fmt.Errorf("instance id %q is not an EC2 instance id", c.InstanceID)
	case !nodeRE.MatchString(c.Node):
		return fmt.Errorf("node name %q is not a Slurm node name", c.Node)
	case c.Expires.Unix() <= 0:
		return errors.New("no expiry")
	}
	return nil
}

// IssueNode mints a node credential for claims (the sizer does, after
// checking the instance's identity).
func IssueNode(admin string, c NodeClaims) (string, error) {
	if err := c.check(); err != nil {
		return "", fmt.Errorf("issuing a node credential: %w", err)
	}
	exp := strconv.FormatInt(c.Expires.Unix(), 10)
	return NodePrefix + c.InstanceID + ":" + c.Node + ":" + exp + ":" + mac(admin, KindNode, c.InstanceID, c.Node, exp), nil
}

// ParseNode splits a node credential into its claims without checking its
// MAC (the agent reads its own credential's expiry this way).
func ParseNode(tok string) (NodeClaims, error) {
	c, _, err := parseNode(tok)
	return c, err
}

func parseNode(tok string) (NodeClaims, string, error) {
	rest, ok := strings.CutPrefix(tok, NodePrefix)
	if !ok {
		return NodeClaims{}, "", errors.New("not a node credential (" + NodePrefix + "...)")
	}
	f := strings.Split(rest, ":")
	if len(f) != 4 {
		return NodeClaims{}, "", errors.New("a node credential has four fields: instance, node, expiry, mac")
	}
	exp, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || exp <= 0 || exp > 1<<40 || strconv.FormatInt(exp, 10) != f[2] {
		return NodeClaims{}, "", errors.New("node credential expiry is not unix seconds")
	}
	c := NodeClaims{InstanceID: f[0], Node: f[1], Expires: time.Unix(exp, 0).UTC()}
	if err := c.check(); err != nil {
		return NodeClaims{}, "", err
	}
	if len(f[3]) != 64 {
		return NodeClaims{}, "", errors.New("node credential mac is not 64 hex digits")
	}
	return c, f[3], nil
}

// ValidAccount checks a Slurm account name for an account credential:
// 1 to 64 letters, digits, '.', '_' or '-'.
func ValidAccount(account string) error {
	if account == "" || len(account) > 64 {
		return fmt.Errorf("account name %q: want 1 to 64 characters", account)
	}
	for _, r := range account {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("account name %q: only letters, digits, '.', '_' and '-' are allowed", account)
		}
	}
	return nil
}

// AccountToken is the read-only credential of a Slurm account (its
// dashboard and the read-only API, its own figures only), valid until
// expires and while the account's credential generation is generation:
// "ba3:<account>:<expiry unix>:<generation>:<mac>".
func AccountToken(admin, account string, expires time.Time, generation int) (string, error) {
	if err := ValidAccount(account); err != nil {
		return "", err
	}
	if generation < 0 {
		return "", fmt.Errorf("account %s: generation %d is negative", account, generation)
	}
	exp, gen := strconv.FormatInt(expires.Unix(), 10), strconv.Itoa(generation)
	return AccountPrefix + account + ":" + exp + ":" + gen + ":" + mac(admin, KindAccount, account, exp, gen), nil
}

// AccountGenerations says an account's current credential generation
// (RotationFile.Generation; nil: 0 for every account).
type AccountGenerations func(account string) int

// verifyAccount checks a ba3 credential: its MAC, expiry and generation.
func verifyAccount(admin, tok string, now time.Time, gens AccountGenerations) (Principal, error) {
	f := strings.Split(strings.TrimPrefix(tok, AccountPrefix), ":")
	if len(f) != 4 || ValidAccount(f[0]) != nil {
		return Principal{}, ErrBadToken
	}
	acct := f[0]
	exp, err1 := strconv.ParseInt(f[1], 10, 64)
	gen, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || gen < 0 || strconv.FormatInt(exp, 10) != f[1] || strconv.Itoa(gen) != f[2] {
		return Principal{}, ErrBadToken
	}
	if subtle.ConstantTimeCompare([]byte(f[3]), []byte(mac(admin, KindAccount, acct, f[1], f[2]))) != 1 {
		return Principal{}, ErrBadToken
	}
	expires := time.Unix(exp, 0).UTC()
	if !now.Before(expires) {
		return Principal{}, fmt.Errorf("%w: account %s's credential expired at %s; ask the sizer's admin for a new one (burst-sizer token account %s)", ErrExpired, acct, expires.Format(time.RFC3339), acct)
	}
	if gens != nil {
		if cur := gens(acct); gen < cur {
			return Principal{}, fmt.Errorf("%w: account %s's credentials were rotated (generation %d, this one is %d); ask the sizer's admin for the new one", ErrRevoked, acct, cur, gen)
		}
	}
	return Principal{Account: acct, Expires: expires}, nil
}

// Principal is who a bearer token belongs to.
type Principal struct {
	Admin    bool
	Route    bool   // the submit-time route credential
	ReadOnly bool   // the read-only credential
	Account  string // account credentials: the one Slurm account whose figures it reads
	// Node credentials: the instance and node they name, and their expiry.
	Node       string
	InstanceID string
	Expires    time.Time
}

// Kind says which kind of credential p holds, for logs and errors.
func (p Principal) Kind() string {
	switch {
	case p.Admin:
		return "admin"
	case p.Route:
		return "route"
	case p.ReadOnly:
		return "read-only"
	case p.Account != "":
		return "account " + p.Account
	case p.Node != "":
		return "node " + p.Node + " (" + p.InstanceID + ")"
	}
	return "none"
}

// Errors of Verify.
var (
	ErrBadToken = errors.New("invalid bearer token")
	ErrExpired  = errors.New("credential expired")
	ErrRevoked  = errors.New("credential revoked")
	ErrRetired  = errors.New("retired credential form (bn1/br1/ba1/ba2): node credentials now come from the identity exchange, route and account credentials from `burst-sizer token init` and `burst-sizer token account` (account credentials now expire)")
)

// Verify checks a bearer token against the admin token, in constant
// time, node and account credentials' expiry against now, and account
// credentials' generation against gens (nil: no account rotated).
func Verify(admin, tok string, now time.Time, gens AccountGenerations) (Principal, error) {
	if admin == "" || tok == "" {
		return Principal{}, ErrBadToken
	}
	switch {
	case strings.HasPrefix(tok, oldNodePrefix), strings.HasPrefix(tok, oldRoutePrefix), strings.HasPrefix(tok, oldAccountPrefix), strings.HasPrefix(tok, oldAccountPrefix2):
		return Principal{}, ErrRetired
	case strings.HasPrefix(tok, NodePrefix):
		c, m, err := parseNode(tok)
		if err != nil {
			return Principal{}, ErrBadToken
		}
		want := mac(admin, KindNode, c.InstanceID, c.Node, strconv.FormatInt(c.Expires.Unix(), 10))
		if subtle.ConstantTimeCompare([]byte(m), []byte(want)) != 1 {
			return Principal{}, ErrBadToken
		}
		if !now.Before(c.Expires) {
			return Principal{}, fmt.Errorf("%w: node %s's credential expired at %s (the agent renews it at half its life)", ErrExpired, c.Node, c.Expires.UTC().Format(time.RFC3339))
		}
		return Principal{Node: c.Node, InstanceID: c.InstanceID, Expires: c.Expires}, nil
	case strings.HasPrefix(tok, AccountPrefix):
		return verifyAccount(admin, tok, now, gens)
	case strings.HasPrefix(tok, ReadOnlyPrefix):
		if subtle.ConstantTimeCompare([]byte(tok), []byte(ReadOnlyToken(admin))) != 1 {
			return Principal{}, ErrBadToken
		}
		return Principal{ReadOnly: true}, nil
	case strings.HasPrefix(tok, RoutePrefix):
		if subtle.ConstantTimeCompare([]byte(tok), []byte(RouteToken(admin))) != 1 {
			return Principal{}, ErrBadToken
		}
		return Principal{Route: true}, nil
	}
	a := sha256.Sum256([]byte(admin))
	b := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		return Principal{}, ErrBadToken
	}
	return Principal{Admin: true}, nil
}
