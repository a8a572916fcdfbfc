// Package munge creates and decodes MUNGE credentials (MUNGE 0.5, the
// authentication service every Slurm site runs) through the munge and
// unmunge programs, so that the sizer learns which local user made a
// request: the credential carries the uid and gid munged saw on its socket,
// cannot be forged without the site's munge key, expires (TTL, 300 s by
// default) and is refused when decoded twice (replay).
package munge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// MaxCredential bounds a credential accepted for decoding; an empty
// payload's credential is about 150 characters.
const MaxCredential = 4096

// ErrRefused wraps every decode failure: a credential munged refused
// (expired, replayed, bad key, malformed) or one burst refuses to pass on.
var ErrRefused = errors.New("MUNGE credential refused")

// Runner runs munge and unmunge against one munged socket.
type Runner struct {
	// Socket is munged's socket ("" = munge's compiled-in default,
	// /run/munge/munge.socket.2).
	Socket string
	// Munge and Unmunge are the programs; default "munge" and "unmunge"
	// found on PATH, else in /usr/bin.
	Munge, Unmunge string
	// Timeout bounds each run (default 5 s).
	Timeout time.Duration
}

func (r Runner) args() []string {
	if r.Socket == "" {
		return nil
	}
	return []string{"--socket", r.Socket}
}

func (r Runner) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return 5 * time.Second
}

// Encode makes a credential with no payload for the calling process's
// user.
func (r Runner) Encode(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	prog := orDefault(r.Munge, "munge")
	cmd := exec.CommandContext(ctx, prog, append([]string{"--no-input"}, r.args()...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("making a MUNGE credential (%s%s): %w: %s", prog, socketNote(r.Socket), err, strings.TrimSpace(stderr.String()))
	}
	cred := strings.TrimSpace(string(out))
	if err := CheckCredential(cred); err != nil {
		return "", fmt.Errorf("making a MUNGE credential (%s): %w", prog, err)
	}
	return cred, nil
}

// Decode asks munged who made cred. Every failure wraps ErrRefused.
func (r Runner) Decode(ctx context.Context, cred string) (Identity, error) {
	if err := CheckCredential(cred); err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	prog := orDefault(r.Unmunge, "unmunge")
	cmd := exec.CommandContext(ctx, prog, r.args()...)
	cmd.Stdin = strings.NewReader(cred + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	id, err := ParseUnmunge(out)
	if err != nil {
		if runErr != nil {
			return Identity{}, fmt.Errorf("%w: %s%s: %w: %s", ErrRefused, prog, socketNote(r.Socket), runErr, strings.TrimSpace(stderr.String()))
		}
		return Identity{}, fmt.Errorf("%w: reading %s's answer: %w", ErrRefused, prog, err)
	}
	if id.StatusCode != 0 {
		return id, fmt.Errorf("%w: %s (status %d)", ErrRefused, id.Status, id.StatusCode)
	}
	if runErr != nil {
		return Identity{}, fmt.Errorf("%w: %s reported success but exited with %w", ErrRefused, prog, runErr)
	}
	return id, nil
}

// CheckCredential checks cred's shape before it reaches unmunge: MUNGE's
// armour ("MUNGE:" ... ":"), base64 characters, bounded length.
func CheckCredential(cred string) error {
	if len(cred) > MaxCredential {
		return fmt.Errorf("credential of %d bytes is longer than %d", len(cred), MaxCredential)
	}
	body, ok := strings.CutPrefix(cred, "MUNGE:")
	if !ok || !strings.HasSuffix(body, ":") || len(body) < 2 {
		return errors.New(`not a MUNGE credential: want "MUNGE:<base64>:" as munge -n prints it`)
	}
	for i, c := range body[:len(body)-1] {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return fmt.Errorf("not a MUNGE credential: character %q at %d is not base64", c, i+len("MUNGE:"))
		}
	}
	return nil
}

// orDefault is s, or the program d: on PATH, else in /usr/bin (a hook or
// cli_filter may run with an empty PATH).
func orDefault(s, d string) string {
	if s != "" {
		return s
	}
	if _, err := exec.LookPath(d); err != nil {
		return "/usr/bin/" + d
	}
	return d
}

func socketNote(socket string) string {
	if socket == "" {
		return ""
	}
	return " --socket " + socket
}
