// Package auth holds burst-sizer's credentials: the admin bearer token (a
// 0600 file) and per-node credentials derived from it, so that burst-resume
// can mint a node's credential without shared state and the sizer can check
// it without a lookup. A node credential only authorises reports for its own
// node; an account credential only reads its own account's figures (the
// dashboard and the read-only API).
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
	"strings"
)

// MinTokenLen is the shortest admin token accepted.
const MinTokenLen = 32

const (
	nodePrefix    = "bn1:"
	routePrefix   = "br1:"
	accountPrefix = "ba1:"
)

// LoadCredential reads any credential (admin, node or route) from the first
// line of path, without the admin token's permission check (the route
// credential file is meant to be world-readable).
func LoadCredential(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading sizer credential: %w", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", fmt.Errorf("reading sizer credential: %s is empty", path)
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
	if strings.HasPrefix(tok, nodePrefix) || strings.HasPrefix(tok, routePrefix) || strings.HasPrefix(tok, accountPrefix) {
		return "", fmt.Errorf("reading sizer token: %s holds a node, route or account credential, not the admin token", path)
	}
	return tok, nil
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

func nodeMAC(admin, node string) string {
	m := hmac.New(sha256.New, []byte(admin))
	m.Write([]byte("burst-sizer node credential v1\x00" + node))
	return hex.EncodeToString(m.Sum(nil))
}

// NodeToken is the credential of node: "bn1:<node>:<HMAC-SHA256(admin, node)>".
func NodeToken(admin, node string) string {
	return nodePrefix + node + ":" + nodeMAC(admin, node)
}

// RouteToken is the submit-time credential: it only authorises /v1/route
// (read-only decisions), so it may be readable by every user who submits
// jobs (burst-sizer route runs as the submitting user inside sbatch's
// cli_filter). "br1:<HMAC-SHA256(admin, "route")>".
func RouteToken(admin string) string { return routePrefix + nodeMAC(admin, "\x00route") }

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

func accountMAC(admin, account string) string {
	m := hmac.New(sha256.New, []byte(admin))
	m.Write([]byte("burst-sizer account credential v1\x00" + account))
	return hex.EncodeToString(m.Sum(nil))
}

// AccountToken is the read-only credential of a Slurm account (its
// dashboard and the read-only API, its own figures only):
// "ba1:<account>:<HMAC-SHA256(admin, label, account)>".
func AccountToken(admin, account string) (string, error) {
	if err := ValidAccount(account); err != nil {
		return "", err
	}
	return accountPrefix + account + ":" + accountMAC(admin, account), nil
}

// Principal is who a bearer token belongs to.
type Principal struct {
	Admin   bool
	Node    string // for node credentials
	Route   bool   // the submit-time route credential
	Account string // for account (read-only) credentials
}

// ErrBadToken is returned for a missing or wrong token.
var ErrBadToken = errors.New("invalid bearer token")

// Verify checks a bearer token against the admin token, in constant time.
func Verify(admin, tok string) (Principal, error) {
	if admin == "" || tok == "" {
		return Principal{}, ErrBadToken
	}
	if rest, ok := strings.CutPrefix(tok, nodePrefix); ok {
		i := strings.LastIndexByte(rest, ':')
		if i <= 0 {
			return Principal{}, ErrBadToken
		}
		node, mac := rest[:i], rest[i+1:]
		if subtle.ConstantTimeCompare([]byte(mac), []byte(nodeMAC(admin, node))) != 1 {
			return Principal{}, ErrBadToken
		}
		return Principal{Node: node}, nil
	}
	if rest, ok := strings.CutPrefix(tok, accountPrefix); ok {
		i := strings.LastIndexByte(rest, ':')
		if i <= 0 || ValidAccount(rest[:i]) != nil {
			return Principal{}, ErrBadToken
		}
		acct, mac := rest[:i], rest[i+1:]
		if subtle.ConstantTimeCompare([]byte(mac), []byte(accountMAC(admin, acct))) != 1 {
			return Principal{}, ErrBadToken
		}
		return Principal{Account: acct}, nil
	}
	if strings.HasPrefix(tok, routePrefix) {
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

// MayReportFor says whether p may send reports about node.
func (p Principal) MayReportFor(node string) bool { return p.Admin || (p.Node != "" && p.Node == node) }
