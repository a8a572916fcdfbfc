package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/nodeid"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/statefile"
)

// CredentialFileName is the node credential in RunDir (0400 root): the
// bootstrap writes it after the identity exchange, burst-agent renews it.
const CredentialFileName = "agent.credential"

// identity is the bootstrap step that makes this instance a known node.
// Its name is its burst:node tag, read from its own instance metadata
// (root only, behind the firewall just installed; a fleet's instances get
// the tag by CreateTags a moment after launch, so it is polled for). Then
// it exchanges its signed identity document, with the node's nonce, for
// its sizer credential (see sizer/server's exchange), which must name the
// same node. Retryable answers (the instance not visible or tagged yet for
// the sizer, rate limits) are retried until IdentityTimeout. A sizer that
// does not answer within SizerWait does not stop the boot: the node joins
// Slurm without a credential and burst-agent makes the exchange later
// (its reports stay spooled meanwhile). A refusal does stop it.
func (b *boot) identity(ctx context.Context) (string, error) {
	nonce, err := loadNonce(b.o.NonceFile)
	if err != nil {
		return "", err
	}
	md := imds.New(imds.Options{Endpoint: b.o.IMDSEndpoint, Timeout: 5 * time.Second, Retry: true})
	deadline := time.Now().Add(b.o.IdentityTimeout)
	node, err := nodeTag(ctx, md, deadline)
	if err != nil {
		return "", err
	}
	if b.o.NodeName != "" && node != b.o.NodeName {
		return "", fmt.Errorf("this instance is tagged for node %q, but the bootstrap was told %q", node, b.o.NodeName)
	}
	if b.ud, err = b.ud.ForNode(node); err != nil {
		return "", err
	}
	b.named = true
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	doc, sig, err := md.SignedIdentity(ictx, sizerapi.IdentityRSA2048)
	cancel()
	if err != nil {
		return "", err
	}
	if b.instance, err = ParseInstanceDoc(doc); err != nil {
		// slurmd then starts without --instance-id; the sizer judges the document
		b.log.Warn("the instance identity document names no usable instance; slurmd will not carry it", "err", err)
	}
	c, err := sizerclient.New(b.ud.Agent.SizerURL, sizerclient.Anonymous, sizerclient.WithCA([]byte(b.ud.Agent.SizerCA)), sizerclient.WithTimeout(10*time.Second), sizerclient.WithFallbackURLs(b.ud.Agent.SizerURLs...))
	if err != nil {
		return "", err
	}
	rq := sizerapi.CredentialRequest{Document: string(doc), Kind: sizerapi.IdentityRSA2048, Signature: string(sig), Nonce: nonce}
	sizerGiveUp := time.Now().Add(b.o.SizerWait)
	var resp sizerapi.CredentialResponse
	for attempt := 1; ; attempt++ {
		resp, err = c.NodeCredential(ctx, rq)
		if err == nil {
			break
		}
		down := errors.Is(err, sizerclient.ErrUnavailable) && !errors.Is(err, sizerclient.ErrUntrusted)
		switch {
		case down && time.Now().After(sizerGiveUp):
			b.log.Warn("the sizer does not answer: joining Slurm without a credential; burst-agent exchanges the identity later",
				"node", node, "err", err)
			return "sizer unreachable: no credential yet (burst-agent retries)", nil
		case !retryable(err) || time.Now().After(deadline):
			return "", fmt.Errorf("exchanging the instance identity for a sizer credential (attempt %d): %w", attempt, err)
		}
		b.log.Info("identity exchange not decided yet; retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(min(time.Duration(attempt)*250*time.Millisecond, 3*time.Second)):
		}
	}
	if resp.Node != node {
		return "", fmt.Errorf("the sizer says this instance is node %q, its tag says %q", resp.Node, node)
	}
	cred := filepath.Join(b.o.RunDir, CredentialFileName)
	if err := installSecretFile(cred, []byte(resp.Credential+"\n"), -1, -1); err != nil {
		return "", fmt.Errorf("writing the node credential: %w", err)
	}
	b.log.Info("this instance is node "+node, "node", node, "instance", resp.InstanceID, "credential_expires", resp.Expires)
	return "", nil
}

// nodeTag reads the instance's burst:node tag from its metadata, polling
// until deadline while it is not there yet.
func nodeTag(ctx context.Context, md *imds.Client, deadline time.Time) (string, error) {
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		b, ok, err := md.Get(cctx, "tags/instance/"+nodeid.TagNode)
		cancel()
		if err != nil {
			return "", fmt.Errorf("reading this instance's %s tag (instance metadata tags must be enabled in the launch template): %w", nodeid.TagNode, err)
		}
		if n := strings.TrimSpace(string(b)); ok && n != "" {
			if !nodeNameRE.MatchString(n) {
				return "", fmt.Errorf("this instance's %s tag %q is not a node name", nodeid.TagNode, n)
			}
			return n, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("this instance has no %s tag (launch it through burst-resume; a fleet's instances are tagged right after launch)", nodeid.TagNode)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
		}
	}
}

var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

func retryable(err error) bool {
	if errors.Is(err, sizerclient.ErrUntrusted) {
		return false // a wrong CA does not fix itself
	}
	var ae *sizerclient.APIError
	if errors.As(err, &ae) {
		switch ae.Code {
		case sizerapi.CodeNotYet, sizerapi.CodeRateLimited, sizerapi.CodeUnverifiable:
			return true
		}
		return ae.Status >= 500
	}
	return errors.Is(err, sizerclient.ErrUnavailable)
}

var nonceFileRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// loadNonce returns the node's nonce, making one (32 random bytes, hex,
// 0600) the first time. It must survive reboots of the instance, so it is
// kept on the root volume, not in /run.
func loadNonce(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		n, err := ParseNonce(b)
		if err != nil {
			return "", fmt.Errorf("node nonce %s: %w (remove it only on a fresh instance)", path, err)
		}
		return n, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading node nonce: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	n := hex.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	if err := statefile.WriteAtomic(path, []byte(n+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing node nonce: %w", err)
	}
	return n, nil
}

// ParseNonce reads a nonce file: 64 lower-case hex digits and a newline.
func ParseNonce(b []byte) (string, error) {
	n := strings.TrimSpace(string(b))
	if !nonceFileRE.MatchString(n) {
		return "", errors.New("not 64 lower-case hex digits")
	}
	return n, nil
}

// Instance is the EC2 instance a node runs on, as its identity document names it.
type Instance struct {
	ID   string `json:"instanceId"`
	Type string `json:"instanceType"`
}

var (
	instanceIDRE   = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)
	instanceTypeRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*\.[a-z0-9][a-z0-9-]*$`)
)

// ParseInstanceDoc reads the instance id and type from an instance identity
// document (the JSON of /latest/dynamic/instance-identity/document) and
// checks their form: they become slurmd arguments.
func ParseInstanceDoc(doc []byte) (Instance, error) {
	var in Instance
	if err := json.Unmarshal(doc, &in); err != nil {
		return Instance{}, fmt.Errorf("reading the instance identity document: %w", err)
	}
	if !instanceIDRE.MatchString(in.ID) {
		return Instance{}, fmt.Errorf("instance identity document: instanceId %.40q is not an EC2 instance id (i-0123456789abcdef0)", in.ID)
	}
	if len(in.Type) > 32 || !instanceTypeRE.MatchString(in.Type) {
		return Instance{}, fmt.Errorf("instance identity document: instanceType %.40q is not an EC2 instance type (g5.xlarge)", in.Type)
	}
	return in, nil
}
