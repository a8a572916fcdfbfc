package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/auth"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/identity"
	"github.com/burst-hpc/burst/sizer/store"
)

// The node identity exchange (POST /v1/node/credential):
//
//  1. The node's bootstrap, as root, reads its identity document and its
//     rsa2048 (or RSA) signature from IMDS, makes a random nonce (kept in
//     its run directory, 0600) and posts all three.
//  2. The sizer verifies the signature with the configured certificate
//     (AWS's regional one; the emulator's in tests) and parses the document:
//     region (and account, when configured) must be this cluster's.
//  3. It asks EC2 (DescribeInstances) about the instance: pending or
//     running, tagged burst:cluster=<this cluster>, the document's type and
//     zone, and tagged burst:node with its Slurm node (set at launch, or by
//     CreateTags right after a fleet launch: until then the answer is 409
//     not_yet and the node retries). When burst-resume recorded the launch
//     the record's node must be the same and the instance not terminated.
//  4. The first exchange for an instance records its node and nonce; a
//     later one (a reboot, a lost credential) must bring the same nonce, so
//     a copied document is worth nothing once the node registered.
//  5. The answer is a node credential (internal/auth: instance, node,
//     expiry, MAC) valid CredentialTTL, and the node name: the node learns
//     who it is here, never from ami-launch-index.
//
// Renewal (POST /v1/node/credential/renew) takes a valid node credential
// and asks EC2 again: an instance no longer running (or no longer tagged
// for that node) gets its identity revoked. Every request with a node
// credential is refused once the sizer knows its instance ended
// (termination recorded or identity revoked).

// EC2API is the EC2 call the identity checks make.
type EC2API interface {
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

// MaxCredentialRequest bounds the identity exchange's body.
const MaxCredentialRequest = 16 << 10

var nonceRE = regexp.MustCompile(`^[0-9a-f]{32,128}$`)

func nonceHash(n string) string {
	s := sha256.Sum256([]byte("burst node nonce\x00" + n))
	return hex.EncodeToString(s[:])
}

func forbidden(format string, args ...any) error {
	return &apiError{403, sizerapi.CodeForbidden, fmt.Sprintf(format, args...)}
}

func notYet(format string, args ...any) error {
	return &apiError{409, sizerapi.CodeNotYet, fmt.Sprintf(format, args...)}
}

func unverifiable(format string, args ...any) error {
	return &apiError{503, sizerapi.CodeUnverifiable, fmt.Sprintf(format, args...)}
}

// instanceFacts is what EC2 says about an instance.
type instanceFacts struct {
	State, Type, Zone, Lifecycle, Cluster, Node string
}

func (s *Server) describe(ctx context.Context, id string) (instanceFacts, bool, error) {
	if s.o.EC2 == nil {
		return instanceFacts{}, false, errors.New("the sizer has no EC2 client")
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := s.o.EC2.DescribeInstances(cctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		var api interface{ ErrorCode() string }
		if errors.As(err, &api) && api.ErrorCode() == "InvalidInstanceID.NotFound" {
			return instanceFacts{}, false, nil
		}
		return instanceFacts{}, false, err
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if aws.ToString(in.InstanceId) != id {
				continue
			}
			f := instanceFacts{Type: string(in.InstanceType), Lifecycle: "on-demand"}
			if in.State != nil {
				f.State = string(in.State.Name)
			}
			if in.Placement != nil {
				f.Zone = aws.ToString(in.Placement.AvailabilityZone)
			}
			if in.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
				f.Lifecycle = "spot"
			}
			for _, t := range in.Tags {
				switch aws.ToString(t.Key) {
				case ec2p.TagCluster:
					f.Cluster = aws.ToString(t.Value)
				case ec2p.TagNode:
					f.Node = aws.ToString(t.Value)
				}
			}
			return f, true, nil
		}
	}
	return instanceFacts{}, false, nil
}

// nodeCredential is POST /v1/node/credential.
func (s *Server) nodeCredential(w http.ResponseWriter, r *http.Request) (any, error) {
	var rq sizerapi.CredentialRequest
	if err := decode(r, &rq); err != nil {
		return nil, err
	}
	if !nonceRE.MatchString(rq.Nonce) {
		return nil, badRequest("nonce: want 32-128 lower-case hex digits")
	}
	if len(s.o.IdentityCerts) == 0 {
		return nil, &apiError{503, sizerapi.CodeUnverifiable, "the sizer has no identity certificate configured (sizer.identity_cert in burst.yaml)"}
	}
	doc, err := s.verifyIdentity(rq, s.o.IdentityCerts)
	if err != nil {
		return nil, err
	}
	d, err := identity.ParseDocument(doc)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	log := s.log.With("instance", d.InstanceID, "remote", r.RemoteAddr)
	if s.o.Region != "" && d.Region != s.o.Region {
		return nil, forbidden("instance %s is in region %s; this cluster is in %s", d.InstanceID, d.Region, s.o.Region)
	}
	if s.o.Account != "" && d.AccountID != s.o.Account {
		return nil, forbidden("instance %s belongs to account %s, not this cluster's", d.InstanceID, d.AccountID)
	}
	ctx := r.Context()
	if ended, why, err := s.st.InstanceEnd(ctx, d.InstanceID); err != nil {
		return nil, err
	} else if ended {
		return nil, &apiError{403, sizerapi.CodeEnded, "instance " + d.InstanceID + " has ended (" + why + ")"}
	}
	prev, known, err := s.st.NodeIdentity(ctx, d.InstanceID)
	if err != nil {
		return nil, err
	}
	if known && prev.NonceHash != nonceHash(rq.Nonce) {
		log.Warn("identity exchange with another nonce refused (a copied identity document?)", "node", prev.Node)
		return nil, forbidden("instance %s registered before with another nonce; only that node may exchange its identity", d.InstanceID)
	}
	f, ok, err := s.describe(ctx, d.InstanceID)
	if err != nil {
		return nil, unverifiable("asking EC2 about %s: %v", d.InstanceID, err)
	}
	if !ok {
		if age := s.now().Sub(d.PendingTime); age > -clockSkew && age < newInstanceLag {
			// EC2 is eventually consistent: DescribeInstances may not list
			// an instance for a while after its launch (its signed
			// identity document says when that was; EC2's clock may run a
			// little ahead of this host's, and the document's time is
			// whole seconds)
			return nil, notYet("EC2 does not list instance %s yet (launched %s ago; new instances show with a delay); retry", d.InstanceID, age.Round(time.Second))
		}
		return nil, forbidden("EC2 does not know instance %s", d.InstanceID)
	}
	if err := s.checkFacts(ctx, d.InstanceID, f, d.InstanceType, d.AvailabilityZone, ""); err != nil {
		return nil, err
	}
	now := s.now()
	exp := now.Add(s.o.CredentialTTL).Truncate(time.Second)
	tok, err := auth.IssueNode(s.token, auth.NodeClaims{InstanceID: d.InstanceID, Node: f.Node, Expires: exp})
	if err != nil {
		return nil, err
	}
	ni := store.NodeIdentity{InstanceID: d.InstanceID, Node: f.Node, NonceHash: nonceHash(rq.Nonce), InstanceType: f.Type, Zone: f.Zone,
		Lifecycle: f.Lifecycle, Pending: d.PendingTime, LastIssued: now, Expires: exp}
	if err := s.st.RecordIssue(context.WithoutCancel(ctx), ni); err != nil {
		if errors.Is(err, store.ErrNonceMismatch) || errors.Is(err, store.ErrRevoked) {
			return nil, forbidden("instance %s: %v", d.InstanceID, err)
		}
		return nil, err
	}
	s.credentials.WithLabelValues("issued").Inc()
	log.Info("node credential issued", "node", f.Node, "expires", exp, "first", !known)
	return sizerapi.CredentialResponse{Credential: tok, Node: f.Node, InstanceID: d.InstanceID, Expires: exp, RenewAfter: now.Add(s.o.CredentialTTL / 2)}, nil
}

func (s *Server) verifyIdentity(rq sizerapi.CredentialRequest, certs []*x509.Certificate) ([]byte, error) {
	switch rq.Kind {
	case "", sizerapi.IdentityRSA2048:
		doc, err := identity.VerifyPKCS7(rq.Signature, certs)
		if err != nil {
			return nil, &apiError{401, sizerapi.CodeUnauthorized, err.Error()}
		}
		if rq.Document != "" && rq.Document != string(doc) {
			return nil, badRequest("document differs from the one the rsa2048 signature carries")
		}
		return doc, nil
	case sizerapi.IdentitySignature:
		if err := identity.VerifySignature([]byte(rq.Document), rq.Signature, certs); err != nil {
			return nil, &apiError{401, sizerapi.CodeUnauthorized, err.Error()}
		}
		return []byte(rq.Document), nil
	}
	return nil, badRequest("kind %q: want %s or %s", rq.Kind, sizerapi.IdentityRSA2048, sizerapi.IdentitySignature)
}

// checkFacts checks what EC2 says of an instance: running for this cluster,
// of the given type and zone (when given), tagged with a node (wantNode, if
// given), and in agreement with burst-resume's launch record.
func (s *Server) checkFacts(ctx context.Context, id string, f instanceFacts, typ, zone, wantNode string) error {
	switch f.State {
	case "pending", "running":
	default:
		return &apiError{403, sizerapi.CodeEnded, fmt.Sprintf("instance %s is %s", id, f.State)}
	}
	if f.Cluster == "" && f.Node == "" {
		// burst tags every instance at launch; one listed with neither tag
		// is new and EC2 does not show its tags yet (eventual consistency,
		// aws-parallelcluster #7265): refused for now, decided on a retry
		return notYet("instance %s shows no %s tag yet (EC2 lists a new instance's tags with a delay); retry", id, ec2p.TagCluster)
	}
	if f.Cluster != s.o.Cluster {
		return forbidden("instance %s is tagged %s=%q, not this cluster %q", id, ec2p.TagCluster, f.Cluster, s.o.Cluster)
	}
	if typ != "" && f.Type != typ || zone != "" && f.Zone != zone {
		return forbidden("instance %s is a %s in %s, not the document's %s in %s", id, f.Type, f.Zone, typ, zone)
	}
	if f.Node == "" {
		return notYet("instance %s has no %s tag yet (burst-resume tags fleet instances right after launch); retry", id, ec2p.TagNode)
	}
	if wantNode != "" && f.Node != wantNode {
		return &apiError{403, sizerapi.CodeEnded, fmt.Sprintf("instance %s is now tagged for node %s, not %s", id, f.Node, wantNode)}
	}
	l, ok, err := s.st.Launch(ctx, id)
	if err != nil {
		return err
	}
	if ok {
		if !l.Terminated.IsZero() {
			return &apiError{403, sizerapi.CodeEnded, "instance " + id + " was terminated"}
		}
		if l.Node != "" && l.Node != f.Node {
			return forbidden("instance %s is tagged for node %s, but burst-resume launched it for %s", id, f.Node, l.Node)
		}
	}
	return nil
}

// renewCredential is POST /v1/node/credential/renew.
func (s *Server) renewCredential(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	if p.Node == "" {
		return nil, forbidden("only a node credential is renewed")
	}
	var empty struct{}
	if err := decode(r, &empty); err != nil {
		return nil, err
	}
	ctx := r.Context()
	f, ok, err := s.describe(ctx, p.InstanceID)
	if err != nil {
		return nil, unverifiable("asking EC2 about %s: %v", p.InstanceID, err)
	}
	if !ok {
		f.State = "gone"
	}
	if err := s.checkFacts(ctx, p.InstanceID, f, "", "", p.Node); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.code == sizerapi.CodeEnded {
			if rerr := s.st.Revoke(context.WithoutCancel(ctx), p.InstanceID, ae.msg, s.now()); rerr != nil {
				return nil, rerr
			}
			s.credentials.WithLabelValues("revoked").Inc()
			s.log.Warn("node identity revoked", "instance", p.InstanceID, "node", p.Node, "why", ae.msg)
		}
		return nil, err
	}
	now := s.now()
	exp := now.Add(s.o.CredentialTTL).Truncate(time.Second)
	tok, err := auth.IssueNode(s.token, auth.NodeClaims{InstanceID: p.InstanceID, Node: p.Node, Expires: exp})
	if err != nil {
		return nil, err
	}
	ni, _, err := s.st.NodeIdentity(ctx, p.InstanceID)
	if err != nil {
		return nil, err
	}
	ni.LastIssued, ni.Expires = now, exp
	if err := s.st.RecordIssue(context.WithoutCancel(ctx), ni); err != nil {
		return nil, forbidden("renewing %s: %v", p.InstanceID, err)
	}
	s.credentials.WithLabelValues("renewed").Inc()
	return sizerapi.CredentialResponse{Credential: tok, Node: p.Node, InstanceID: p.InstanceID, Expires: exp, RenewAfter: now.Add(s.o.CredentialTTL / 2)}, nil
}

// checkNode admits a node credential: its identity was issued by this
// sizer for that node and its instance has not ended.
func (s *Server) checkNode(ctx context.Context, p auth.Principal) (store.NodeIdentity, error) {
	ended, why, err := s.st.InstanceEnd(ctx, p.InstanceID)
	if err != nil {
		return store.NodeIdentity{}, err
	}
	if ended {
		return store.NodeIdentity{}, &apiError{401, sizerapi.CodeEnded, "the credential's instance " + p.InstanceID + " has ended (" + why + ")"}
	}
	ni, ok, err := s.st.NodeIdentity(ctx, p.InstanceID)
	if err != nil {
		return store.NodeIdentity{}, err
	}
	if !ok || ni.Node != p.Node {
		return store.NodeIdentity{}, &apiError{401, sizerapi.CodeUnauthorized, "the sizer issued no credential to instance " + p.InstanceID + " for node " + p.Node}
	}
	return ni, nil
}

// newInstanceLag is how long after its launch an instance EC2 does not list
// yet is answered not_yet rather than refused.
const newInstanceLag = 5 * time.Minute

// clockSkew is how far ahead of this host's clock a signed launch time may
// be and still count as a new instance's.
const clockSkew = time.Minute
