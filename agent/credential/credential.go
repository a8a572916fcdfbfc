// Package credential keeps burst-agent's node credential alive: the
// bootstrap obtained it with the instance's signed identity document
// (internal/bootstrap, sizer/server); this renews it at half its life with
// the sizer (which asks EC2 again each time), rewrites the credential file
// in place (0400 root; the report sink re-reads it on every send), and, if
// the credential expired anyway (the sizer was down longer than that),
// exchanges the identity document again with the node's nonce. An instance
// the sizer says has ended gets no new credential: the renewer stops.
package credential

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/statefile"
)

// Sizer is the part of the sizer client the renewer uses; New makes a
// client with a credential (renew) or anonymous (exchange).
type Sizer interface {
	RenewCredential(ctx context.Context) (sizerapi.CredentialResponse, error)
	NodeCredential(ctx context.Context, rq sizerapi.CredentialRequest) (sizerapi.CredentialResponse, error)
}

// Identity reads the instance's identity document and signature (IMDS).
type Identity func(ctx context.Context) (doc, sig []byte, err error)

// Options configure a Renewer.
type Options struct {
	Node      string // this node (the credential must name it)
	File      string // the credential file
	NonceFile string // the node's identity nonce (bootstrap)
	// Client returns a sizer client authenticating with token
	// (sizerclient.Anonymous for the exchange).
	Client   func(token string) (Sizer, error)
	Identity Identity
	Poll     time.Duration // how often the expiry is looked at; default 30 s
	Now      func() time.Time
	Logger   *slog.Logger
}

// Renewer renews one node credential.
type Renewer struct {
	o        Options
	lifetime time.Duration // the longest remaining life seen right after an issue
	// renewAt and expireAt are the credential's half-life and end on this
	// node's own clock, from the sizer's answer (its renew_after and
	// expires are the sizer's clock: a node clock off by more than the
	// credential's life would otherwise renew too late or on every poll);
	// zero until this process has been issued one.
	renewAt, expireAt time.Time
}

// New returns a Renewer.
func New(o Options) *Renewer {
	if o.Poll <= 0 {
		o.Poll = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Renewer{o: o}
}

// ErrEnded: the sizer says the instance ended; nothing renews it.
var ErrEnded = errors.New("the sizer says this instance has ended")

// Read returns the credential in the file and its claims.
func Read(path string) (string, auth.NodeClaims, error) {
	tok, err := auth.LoadCredential(path)
	if err != nil {
		return "", auth.NodeClaims{}, err
	}
	c, err := auth.ParseNode(tok)
	if err != nil {
		return "", auth.NodeClaims{}, fmt.Errorf("credential file %s: %w", path, err)
	}
	return tok, c, nil
}

// Check renews when less than half the credential's life is left (or it
// expired) and reports whether it did.
func (r *Renewer) Check(ctx context.Context) (bool, error) {
	tok, c, err := Read(r.o.File)
	if errors.Is(err, fs.ErrNotExist) {
		// the node booted while the sizer did not answer: exchange now
		resp, err := r.exchange(ctx)
		if err != nil {
			return false, err
		}
		if r.o.Node != "" && resp.Node != r.o.Node {
			return false, fmt.Errorf("the sizer names this instance node %q, not %q", resp.Node, r.o.Node)
		}
		return true, r.write(resp)
	}
	if err != nil {
		return false, err
	}
	now := r.o.Now()
	left := c.Expires.Sub(now)
	if !r.expireAt.IsZero() {
		// durations measured here since the last issue, whatever the
		// offset between this clock and the sizer's
		if now.Before(r.renewAt) {
			return false, nil
		}
		left = r.expireAt.Sub(now)
	} else {
		if left > r.lifetime {
			r.lifetime = left
		}
		if left > r.lifetime/2 {
			return false, nil
		}
	}
	var resp sizerapi.CredentialResponse
	if left > 0 {
		cl, err := r.o.Client(tok)
		if err != nil {
			return false, err
		}
		resp, err = cl.RenewCredential(ctx)
		if err != nil {
			if ended(err) {
				return false, fmt.Errorf("%w: %v", ErrEnded, err)
			}
			var ae *sizerclient.APIError
			if !errors.As(err, &ae) || ae.Status != 401 {
				return false, fmt.Errorf("renewing the node credential (%s left): %w", left.Round(time.Second), err)
			}
			left = 0 // refused as expired or unknown: prove the identity again
		}
	}
	if left <= 0 {
		if resp, err = r.exchange(ctx); err != nil {
			return false, err
		}
	}
	if resp.InstanceID != c.InstanceID || resp.Node != c.Node {
		return false, fmt.Errorf("the sizer issued a credential for %s/%s, this node is %s/%s", resp.InstanceID, resp.Node, c.InstanceID, c.Node)
	}
	return true, r.write(resp)
}

func (r *Renewer) write(resp sizerapi.CredentialResponse) error {
	if err := statefile.WriteAtomic(r.o.File, []byte(resp.Credential+"\n"), 0o400); err != nil {
		return fmt.Errorf("writing the node credential: %w", err)
	}
	now := r.o.Now()
	r.lifetime = resp.Expires.Sub(now)
	// the sizer sets renew_after at half the life from its now: what is
	// left after it is the other half
	if half := resp.Expires.Sub(resp.RenewAfter); !resp.RenewAfter.IsZero() && half > 0 {
		r.renewAt, r.expireAt = now.Add(half), now.Add(2*half)
	}
	r.o.Logger.Info("node credential written", "expires", resp.Expires)
	return nil
}

func (r *Renewer) exchange(ctx context.Context) (sizerapi.CredentialResponse, error) {
	b, err := os.ReadFile(r.o.NonceFile)
	if err != nil {
		return sizerapi.CredentialResponse{}, fmt.Errorf("credential expired and the node nonce is unreadable: %w", err)
	}
	doc, sig, err := r.o.Identity(ctx)
	if err != nil {
		return sizerapi.CredentialResponse{}, fmt.Errorf("credential expired; reading the identity document: %w", err)
	}
	cl, err := r.o.Client(sizerclient.Anonymous)
	if err != nil {
		return sizerapi.CredentialResponse{}, err
	}
	nonce := string(b)
	for len(nonce) > 0 && (nonce[len(nonce)-1] == '\n' || nonce[len(nonce)-1] == '\r') {
		nonce = nonce[:len(nonce)-1]
	}
	resp, err := cl.NodeCredential(ctx, sizerapi.CredentialRequest{Document: string(doc), Kind: sizerapi.IdentityRSA2048, Signature: string(sig), Nonce: nonce})
	if err != nil {
		if ended(err) {
			return resp, fmt.Errorf("%w: %v", ErrEnded, err)
		}
		return resp, fmt.Errorf("credential expired; exchanging the identity again: %w", err)
	}
	r.o.Logger.Warn("obtained a node credential with the identity document (none, or an expired one, before)")
	return resp, nil
}

func ended(err error) bool {
	var ae *sizerclient.APIError
	return errors.As(err, &ae) && ae.Code == sizerapi.CodeEnded
}

// Run checks every Poll until ctx ends or the instance ended.
func (r *Renewer) Run(ctx context.Context) error {
	t := time.NewTicker(r.o.Poll)
	defer t.Stop()
	for {
		if _, err := r.Check(ctx); err != nil {
			if errors.Is(err, ErrEnded) {
				r.o.Logger.Error("node credential not renewed: the instance has ended", "err", err)
				return err
			}
			r.o.Logger.Warn("node credential", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
