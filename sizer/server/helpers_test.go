package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/awssdk"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
	"github.com/burst-hpc/burst/internal/tlspin"
	"github.com/burst-hpc/burst/sizer/identity"
	"github.com/burst-hpc/burst/sizer/tlsca"
	"github.com/burst-hpc/burst/test/ec2emu"
)

func testClasses() []sizing.Class {
	return []sizing.Class{
		{Name: "l4-1x", GPUModel: "l4", GPUsPerNode: 1, InstanceTypes: []string{"g6.xlarge", "g6.2xlarge"}},
		{Name: "l40s-1x", GPUModel: "l40s", GPUsPerNode: 1, InstanceTypes: []string{"g6e.xlarge"}},
		{Name: "l40s-8x", GPUModel: "l40s", GPUsPerNode: 8, InstanceTypes: []string{"g6e.48xlarge"}},
		{Name: "a100-8x", GPUModel: "a100", GPUsPerNode: 8, InstanceTypes: []string{"p4d.24xlarge"}},
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	srv    *Server
	url    string
	token  string
	dir    string
	caFile string
	clk    *clock
	cancel context.CancelFunc
	done   chan error
	emu    *ec2emu.Server
	api    *ec2.Client
	slurm  *slurmfake.Slurm
}

// start runs a sizer over HTTPS (its own CA, as `burst-sizer tls init`
// makes it) against an EC2 emulator (DescribeInstances, identity
// certificate) and a fake Slurm.
func start(t testing.TB, budgets map[string]float64, mod ...func(*Options)) *fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	tok, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	// real time (the emulator's identity documents carry it), at least six
	// hours into the month (tests look back a few hours for spend)
	now := time.Now().UTC().Truncate(time.Second)
	if ms := time.Date(now.Year(), now.Month(), 1, 6, 0, 0, 0, time.UTC); now.Before(ms) {
		now = ms
	}
	clk := &clock{t: now}
	emu := ec2emu.New(ec2emu.Options{BootDelay: -1, ShutdownDelay: -1})
	if err := emu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	api, err := ec2p.NewSDKClient(context.Background(), awssdk.Options{Region: "us-east-1", Endpoint: emu.URL(), StaticCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := identity.ParseCertificates(emu.IdentityCertPEM())
	if err != nil {
		t.Fatal(err)
	}
	tlsDir := filepath.Join(t.TempDir(), "tls")
	paths := tlsca.Paths{CAFile: filepath.Join(tlsDir, "ca.pem"), CAKey: filepath.Join(tlsDir, "ca.key"), CertFile: filepath.Join(tlsDir, "server.pem"), KeyFile: filepath.Join(tlsDir, "server.key")}
	if _, err := tlsca.Init(tlsca.Options{Paths: paths, Hosts: []string{"127.0.0.1"}, Cluster: "test"}); err != nil {
		t.Fatal(err)
	}
	sl := slurmfake.New(nil, nil)
	o := Options{Token: tok, StateDir: dir, Budgets: budgets, Classes: testClasses(), Region: "us-east-1",
		Zones: []string{"us-east-1a", "us-east-1b"}, Now: clk.Now, MaxBodyBytes: 1 << 20,
		TLSCertFile: paths.CertFile, TLSKeyFile: paths.KeyFile, Cluster: "test", IdentityCerts: certs, EC2: api, Slurm: sl,
		CredentialTTL: 48 * time.Hour, NodeRate: -1}
	for _, m := range mod {
		m(&o)
	}
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{srv: s, url: "https://" + ln.Addr().String(), token: tok, dir: dir, caFile: paths.CAFile, clk: clk, cancel: cancel,
		done: make(chan error, 1), emu: emu, api: api, slurm: sl}
	go func() { f.done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { f.stop() })
	return f
}

func (f *fixture) stop() error {
	f.cancel()
	select {
	case err := <-f.done:
		f.done <- err
		return err
	case <-time.After(time.Minute):
		return errors.New("server did not stop")
	}
}

func (f *fixture) client(t testing.TB, tok string) *sizerclient.Client {
	c, err := sizerclient.New(f.url, tok, sizerclient.WithTimeout(10*time.Second), sizerclient.WithCAFile(f.caFile))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// httpClient trusts the fixture's CA.
func (f *fixture) httpClient(t testing.TB) *http.Client {
	hc, err := tlspin.LoadHTTPClient(f.caFile, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// instance launches an emulator instance of this cluster for node (no
// node tag when node is ""), spot or on-demand.
func (f *fixture) instance(t testing.TB, node, typ, zone string, spot bool) string {
	t.Helper()
	tags := []types.Tag{{Key: aws.String(ec2p.TagCluster), Value: aws.String("test")}}
	if node != "" {
		tags = append(tags, types.Tag{Key: aws.String(ec2p.TagNode), Value: aws.String(node)})
	}
	in := &ec2.RunInstancesInput{ImageId: aws.String("ami-1"), InstanceType: types.InstanceType(typ), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: aws.String("subnet-" + zone[len(zone)-1:]), TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: tags}}}
	if spot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot}
	}
	out, err := f.api.RunInstances(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.Instances[0].InstanceId)
}

// proof reads an instance's signed identity document from its IMDS.
func (f *fixture) proof(t testing.TB, id, nonce string) sizerapi.CredentialRequest {
	t.Helper()
	u, err := f.emu.IMDSURL(id)
	if err != nil {
		t.Fatal(err)
	}
	doc, sig, err := imds.New(imds.Options{Endpoint: u, Timeout: 5 * time.Second}).SignedIdentity(context.Background(), sizerapi.IdentityRSA2048)
	if err != nil {
		t.Fatal(err)
	}
	return sizerapi.CredentialRequest{Document: string(doc), Kind: sizerapi.IdentityRSA2048, Signature: string(sig), Nonce: nonce}
}

const testNonce = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// node launches an instance for node and exchanges its identity: the
// node's credential and instance id.
func (f *fixture) node(t testing.TB, node, typ, zone string, spot bool) (string, string) {
	t.Helper()
	id := f.instance(t, node, typ, zone, spot)
	resp, err := f.client(t, sizerclient.Anonymous).NodeCredential(context.Background(), f.proof(t, id, testNonce))
	if err != nil {
		t.Fatalf("identity exchange of %s: %v", id, err)
	}
	if resp.Node != node || resp.InstanceID != id {
		t.Fatalf("exchange named %s/%s, want %s/%s", resp.InstanceID, resp.Node, id, node)
	}
	return resp.Credential, id
}

// runs tells the fake Slurm that job runs on node since now.
func (f *fixture) runs(job uint32, node string) {
	f.slurm.SetJobs(append(f.jobs(), slurm.Job{ID: job, State: "RUNNING", Nodes: node, StartTime: f.clk.Now()})...)
}

func (f *fixture) jobs() []slurm.Job {
	js, _ := f.slurm.Jobs(context.Background())
	return js
}

func gpuBatch(node string, seq0 uint64, n int, job uint32, t time.Time) sizerapi.ReportBatch {
	b := sizerapi.ReportBatch{Node: node, GPUSource: sizerapi.GPUSourceNVML}
	for i := 0; i < n; i++ {
		rec := sizerapi.Record{Seq: seq0 + uint64(i), Time: t.Add(time.Duration(i) * time.Second), Kind: sizerapi.KindGPU}
		for g := 0; g < 8; g++ {
			rd := sizerapi.GPUReading{Index: g, MemoryTotalBytes: 45776 << 20}
			if g == 0 {
				rd.UtilPercent, rd.MemoryUsedBytes, rd.JobIDs = 60, 15<<30, []uint32{job}
			}
			rec.GPUs = append(rec.GPUs, rd)
		}
		b.Records = append(b.Records, rec)
	}
	return b
}

func (f *fixture) metrics(t testing.TB) string {
	t.Helper()
	req, _ := http.NewRequest("GET", f.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+auth.ReadOnlyToken(f.token))
	resp, err := f.httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func isStatus(err error, status int) bool {
	var ae *sizerclient.APIError
	return errors.As(err, &ae) && ae.Status == status
}
