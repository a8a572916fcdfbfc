package server

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/auth"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
)

func apiCode(err error) string {
	var ae *sizerclient.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// dump is the store, every table row by row.
func (f *fixture) dump(t testing.TB) map[string][]string {
	t.Helper()
	d, err := f.srv.Store().Dump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func sameStore(t *testing.T, what string, before, after map[string][]string) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		for tbl := range after {
			if !reflect.DeepEqual(before[tbl], after[tbl]) {
				t.Errorf("%s changed table %s:\n before %q\n after  %q", what, tbl, before[tbl], after[tbl])
			}
		}
	}
}

// TestIdentityExchange: a node obtains its credential and name only with
// its own signed identity document, for an instance EC2 shows running and
// tagged for this cluster and node, and with its own nonce.
func TestIdentityExchange(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	anon := f.client(t, sizerclient.Anonymous)

	// the node learns its name (the burst:node tag) here
	id := f.instance(t, "gpu-4", "g5.xlarge", "us-east-1b", true)
	proof := f.proof(t, id, testNonce)
	resp, err := anon.NodeCredential(ctx, proof)
	if err != nil {
		t.Fatal(err)
	}
	c, err := auth.ParseNode(resp.Credential)
	if resp.Node != "gpu-4" || resp.InstanceID != id || err != nil || c.Node != "gpu-4" || c.InstanceID != id ||
		!resp.Expires.Equal(c.Expires) || !resp.RenewAfter.Before(resp.Expires) {
		t.Fatalf("response %+v claims %+v %v", resp, c, err)
	}
	ni, ok, _ := f.srv.Store().NodeIdentity(ctx, id)
	if !ok || ni.Lifecycle != "spot" || ni.InstanceType != "g5.xlarge" || ni.Zone != "us-east-1b" || ni.Node != "gpu-4" || ni.NonceHash == testNonce {
		t.Errorf("recorded identity %+v", ni)
	}
	// the same node again (a reboot, a lost credential): same nonce, fine
	if _, err := anon.NodeCredential(ctx, proof); err != nil {
		t.Errorf("re-exchange with the node's nonce: %v", err)
	}

	before := f.dump(t)
	refused := func(what string, rq sizerapi.CredentialRequest, code string) {
		t.Helper()
		_, err := anon.NodeCredential(ctx, rq)
		if err == nil || code != "" && apiCode(err) != code {
			t.Errorf("%s: %v, want code %q", what, err, code)
		}
	}
	// a copy of the document with another nonce (a job that read it, or
	// anyone who saw it) is worth nothing
	other := proof
	other.Nonce = strings.Repeat("ab", 32)
	refused("replayed document, other nonce", other, sizerapi.CodeForbidden)
	// a document changed after signing, or signed by another key
	forged := proof
	forged.Document = strings.Replace(proof.Document, "g5.xlarge", "p5.48xlarge", 1)
	forged.Kind = sizerapi.IdentitySignature
	refused("document with a signature that is not its own", forged, sizerapi.CodeUnauthorized)
	foreign := start(t, nil)
	fid := foreign.instance(t, "gpu-4", "g5.xlarge", "us-east-1b", true)
	refused("identity signed by another EC2 (emulator)", foreign.proof(t, fid, testNonce), sizerapi.CodeUnauthorized)
	bad := proof
	bad.Nonce = "short"
	refused("malformed nonce", bad, sizerapi.CodeBadRequest)
	sameStore(t, "refused exchanges", before, f.dump(t))

	// a fleet instance before burst-resume's CreateTags: retry later
	untagged := f.instance(t, "", "g5.xlarge", "us-east-1a", false)
	refused("instance without its node tag yet", f.proof(t, untagged, testNonce), sizerapi.CodeNotYet)
	if _, err := f.api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{untagged}, Tags: []types.Tag{{Key: aws.String(ec2p.TagNode), Value: aws.String("gpu-6")}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := anon.NodeCredential(ctx, f.proof(t, untagged, testNonce)); err != nil || r.Node != "gpu-6" {
		t.Errorf("after CreateTags: %+v %v", r, err)
	}
	// a new instance EC2 does not list yet (eventual consistency): retry
	if err := f.emu.SetDescribeLag(time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	hidden := f.instance(t, "gpu-10", "g5.xlarge", "us-east-1a", false)
	refused("instance EC2 does not list yet", f.proof(t, hidden, testNonce), sizerapi.CodeNotYet)
	f.emu.SetDescribeLag(0, 0)
	// a new instance EC2 lists without any tag yet (eventual consistency):
	// retry later, and once its tags show, it is decided on them
	bare, err := f.api.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-1"), InstanceType: types.InstanceTypeG5Xlarge, MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	bareID := aws.ToString(bare.Instances[0].InstanceId)
	refused("instance listed without its tags yet", f.proof(t, bareID, testNonce), sizerapi.CodeNotYet)
	if _, err := f.api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{bareID}, Tags: []types.Tag{{Key: aws.String(ec2p.TagCluster), Value: aws.String("other")},
		{Key: aws.String(ec2p.TagNode), Value: aws.String("gpu-9")}}}); err != nil {
		t.Fatal(err)
	}
	refused("a late-tagged instance of another cluster", f.proof(t, bareID, testNonce), sizerapi.CodeForbidden)
	// another cluster's instance
	out, err := f.api.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-1"), InstanceType: types.InstanceTypeG5Xlarge, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{
			{Key: aws.String(ec2p.TagCluster), Value: aws.String("other")}, {Key: aws.String(ec2p.TagNode), Value: aws.String("gpu-4")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	refused("another cluster's instance", f.proof(t, aws.ToString(out.Instances[0].InstanceId), testNonce), sizerapi.CodeForbidden)
	// burst-resume recorded the launch for another node than the tag says
	mis := f.instance(t, "gpu-7", "g5.xlarge", "us-east-1a", false)
	if err := f.client(t, f.token).Launched(ctx, sizerapi.InstanceEvent{InstanceID: mis, Node: "gpu-8", InstanceType: "g5.xlarge", Zone: "us-east-1a", Time: f.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	refused("tag and launch record disagree", f.proof(t, mis, testNonce), sizerapi.CodeForbidden)
}

// TestCredentialDiesWithItsInstance: a credential is refused once the
// sizer knows its instance ended (termination recorded), a renewal asks
// EC2 and revokes a stopped instance's identity, and credentials expire.
func TestCredentialDiesWithItsInstance(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	admin := f.client(t, f.token)

	// terminated through burst-suspend's record
	cred, id := f.node(t, "gpu-1", "g5.xlarge", "us-east-1a", false)
	f.runs(1, "gpu-1")
	if _, err := f.client(t, cred).Report(ctx, gpuBatch("gpu-1", 1, 1, 1, f.clk.Now())); err != nil {
		t.Fatal(err)
	}
	if err := admin.Launched(ctx, sizerapi.InstanceEvent{InstanceID: id, Node: "gpu-1", InstanceType: "g5.xlarge", Time: f.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Terminated(ctx, id, f.clk.Now()); err != nil {
		t.Fatal(err)
	}
	before := f.dump(t)
	if _, err := f.client(t, cred).Report(ctx, gpuBatch("gpu-1", 2, 1, 1, f.clk.Now())); apiCode(err) != sizerapi.CodeEnded {
		t.Errorf("report with an ended instance's credential: %v", err)
	}
	if _, err := f.client(t, cred).RenewCredential(ctx); apiCode(err) != sizerapi.CodeEnded {
		t.Errorf("renewal of an ended instance's credential: %v", err)
	}
	if _, err := f.client(t, sizerclient.Anonymous).NodeCredential(ctx, f.proof(t, id, testNonce)); apiCode(err) != sizerapi.CodeEnded {
		t.Errorf("identity exchange of an ended instance: %v", err)
	}
	sameStore(t, "an ended instance's credential", before, f.dump(t))

	// renewal asks EC2: stopped behind the sizer's back -> revoked
	cred2, id2 := f.node(t, "gpu-2", "g5.xlarge", "us-east-1a", false)
	if r, err := f.client(t, cred2).RenewCredential(ctx); err != nil || r.Node != "gpu-2" || r.Credential == "" {
		t.Fatalf("renewal: %+v %v", r, err)
	}
	if _, err := f.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client(t, cred2).RenewCredential(ctx); apiCode(err) != sizerapi.CodeEnded {
		t.Errorf("renewal after EC2 terminated the instance: %v", err)
	}
	if _, err := f.client(t, cred2).Report(ctx, gpuBatch("gpu-2", 1, 1, 1, f.clk.Now())); apiCode(err) != sizerapi.CodeEnded {
		t.Errorf("report after revocation: %v", err)
	}

	// expiry
	cred3, _ := f.node(t, "gpu-3", "g5.xlarge", "us-east-1a", false)
	f.clk.Add(49 * time.Hour)
	if err := f.client(t, cred3).Interruption(ctx, sizerapi.Interruption{Action: "terminate"}); !errors.Is(err, sizerclient.ErrUnauthorized) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired credential: %v", err)
	}
}
