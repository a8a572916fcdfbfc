package rest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
)

// Slurm's auth/jwt: a client sends X-SLURM-USER-NAME and X-SLURM-USER-TOKEN;
// slurmctld verifies the token (an HS256 JWT signed with the key of
// AuthAltParameters=jwt_key=...) and runs the request as the user of its
// "sun" claim, until its "exp".
const (
	headerUser  = "X-SLURM-USER-NAME"
	headerToken = "X-SLURM-USER-TOKEN"
)

// DefaultTokenLifetime is how long a token burst mints is valid; it is
// renewed when less than a third of that is left.
const DefaultTokenLifetime = 5 * time.Minute

// maxCredentialSize bounds the key and token files burst reads.
const maxCredentialSize = 64 << 10

// credentials gives the user name and token of each request.
type credentials interface {
	// token returns the user name and a token valid for at least a while.
	token(now time.Time) (user, token string, err error)
}

// minted signs its own short-lived tokens with the JWT key.
type minted struct {
	user     string
	key      []byte
	lifetime time.Duration

	mu   sync.Mutex
	tok  string
	exp  time.Time
	made time.Time
}

// newMinted reads the key file (checking its mode) for tokens of user.
func newMinted(keyFile, user string, lifetime time.Duration) (*minted, error) {
	if err := auth.CheckPrivate(keyFile); err != nil {
		return nil, fmt.Errorf("JWT key: %w", err)
	}
	key, err := readLimited(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading the JWT key: %w", err)
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("JWT key %s: %d bytes; Slurm's jwt_key wants a random key of at least 16 (32 recommended)", keyFile, len(key))
	}
	if user == "" {
		return nil, errors.New("JWT key: no user name for the tokens (slurm.rest.user)")
	}
	if lifetime <= 0 {
		lifetime = DefaultTokenLifetime
	}
	return &minted{user: user, key: key, lifetime: lifetime}, nil
}

func (m *minted) token(now time.Time) (string, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// renew once two thirds of the lifetime are gone (or the clock jumped back)
	if m.tok == "" || now.After(m.exp.Add(-m.lifetime/3)) || now.Before(m.made) {
		m.tok = MintToken(m.key, m.user, now, m.lifetime)
		m.made, m.exp = now, now.Add(m.lifetime)
	}
	return m.user, m.tok, nil
}

// MintToken returns an HS256 JWT for Slurm's auth/jwt: claims sun (the user
// name), iat and exp.
func MintToken(key []byte, user string, now time.Time, lifetime time.Duration) string {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(struct {
		Exp int64  `json:"exp"`
		Iat int64  `json:"iat"`
		Sun string `json:"sun"`
	}{now.Add(lifetime).Unix(), now.Unix(), user})
	msg := header + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(mac.Sum(nil))
}

// tokenFile is a token someone else renews (`scontrol token`, a site's
// token service): re-read whenever the file changes.
type tokenFile struct {
	path string
	user string // from the configuration; "" takes the token's sun

	mu    sync.Mutex
	stamp fileStamp
	tok   string
	sun   string
	exp   time.Time
}

type fileStamp struct {
	ino, size int64
	mtime     time.Time
}

func newTokenFile(path, user string) (*tokenFile, error) {
	t := &tokenFile{path: path, user: user}
	if _, _, err := t.token(time.Now()); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *tokenFile) token(now time.Time) (string, string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fi, err := os.Stat(t.path)
	if err != nil {
		return "", "", fmt.Errorf("token file: %w", err)
	}
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if s, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = int64(s.Ino)
	}
	if st != t.stamp || t.tok == "" {
		if err := auth.CheckPrivate(t.path); err != nil {
			return "", "", fmt.Errorf("token file: %w", err)
		}
		b, err := readLimited(t.path)
		if err != nil {
			return "", "", fmt.Errorf("reading the token file: %w", err)
		}
		tok, sun, exp, err := ParseTokenFile(b)
		if err != nil {
			return "", "", fmt.Errorf("token file %s: %w", t.path, err)
		}
		t.tok, t.sun, t.exp, t.stamp = tok, sun, exp, st
	}
	if !t.exp.IsZero() && !now.Before(t.exp) {
		return "", "", fmt.Errorf("the token in %s expired at %s; renew it (scontrol token username=%s lifespan=SECONDS > %s)",
			t.path, t.exp.UTC().Format(time.RFC3339), t.userName(), t.path)
	}
	return t.userName(), t.tok, nil
}

func (t *tokenFile) userName() string {
	if t.user != "" {
		return t.user
	}
	return t.sun
}

// ParseTokenFile reads a token file: the token alone, or what `scontrol
// token` prints ("SLURM_JWT=eyJ..."), surrounding space ignored. It
// returns the token and, read from its payload without verifying it (only
// slurmctld can), the user (sun) and expiry (exp; zero when absent).
func ParseTokenFile(b []byte) (tok, sun string, exp time.Time, err error) {
	s := strings.TrimSpace(string(b))
	s = strings.TrimPrefix(s, "SLURM_JWT=")
	if s == "" {
		return "", "", time.Time{}, errors.New("empty; write the token (or `scontrol token` output) into it")
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return "", "", time.Time{}, errors.New("holds more than one line or word; want one token")
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return "", "", time.Time{}, fmt.Errorf("not a JWT (want three dot-separated parts, got %d)", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return "", "", time.Time{}, errors.New("not a JWT: its payload is not base64url")
	}
	var c struct {
		Sun *string         `json:"sun"`
		Exp json.RawMessage `json:"exp"`
	}
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	if err := d.Decode(&c); err != nil {
		return "", "", time.Time{}, errors.New("not a JWT: its payload is not a JSON object")
	}
	if c.Sun == nil || *c.Sun == "" {
		return "", "", time.Time{}, errors.New(`the token has no "sun" (user name) claim, which Slurm's auth/jwt requires`)
	}
	if len(c.Exp) > 0 {
		var n json.Number
		if c.Exp[0] == '"' || json.Unmarshal(c.Exp, &n) != nil {
			return "", "", time.Time{}, errors.New(`the token's "exp" claim is not a number`)
		}
		sec, err := n.Int64()
		if err != nil {
			return "", "", time.Time{}, errors.New(`the token's "exp" claim is not a whole number`)
		}
		exp = time.Unix(sec, 0)
	}
	return s, *c.Sun, exp, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCredentialSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCredentialSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxCredentialSize)
	}
	return b, nil
}
