package ledger

import (
	"context"
	"math"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/test/ec2emu"
)

type env struct {
	emu  *ec2emu.Server
	prov *ec2p.Provider
	st   *store.Store
	l    *Ledger
	// drain hands the queued state changes to the store (no-op without events)
	drain func(context.Context)
}

// sync is what burst-sizer serve sees: the events read, then a pass.
func (e *env) sync(ctx context.Context) (sizerapi.LedgerSync, error) {
	e.drain(ctx)
	return e.l.Sync(ctx)
}

func newEnv(t *testing.T, withEvents bool) *env {
	t.Helper()
	emu := ec2emu.New(ec2emu.Options{Subnets: map[string]string{"subnet-a": "us-east-1a", "subnet-b": "us-east-1b"},
		BootDelay: 1500 * time.Millisecond, ShutdownDelay: 500 * time.Millisecond, NoticePeriod: 2 * time.Second})
	if err := emu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""), HTTPClient: &http.Client{}}
	ec := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(emu.URL()) })
	prov, err := ec2p.New(ec, ec2p.Options{Cluster: "test", Subnets: map[string]string{"us-east-1a": "subnet-a", "us-east-1b": "subnet-b"}, ImageID: "ami-1", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := Options{Cloud: prov, Store: st, Grace: time.Second}
	drain := func(context.Context) {}
	if withEvents {
		if _, err := emu.AddEventRule(ec2emu.EventRule{Queue: "burst-events", DetailTypes: []string{ec2emu.DetailStateChange}}); err != nil {
			t.Fatal(err)
		}
		q := sqs.NewFromConfig(cfg, func(so *sqs.Options) { so.BaseEndpoint = aws.String(emu.URL()) })
		drain = func(ctx context.Context) {
			pumpStateChanges(ctx, t, q, emu.URL()+"/"+ec2emu.DefaultAccount+"/burst-events", st)
		}
	}
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &env{emu, prov, st, l, drain}
}

func (e *env) launch(t *testing.T, node string, job uint32, capacity capacity.Type) string {
	t.Helper()
	res, err := e.prov.Launch(context.Background(), cloud.LaunchRequest{Cluster: "test", Nodes: []cloud.NodeSpec{{Node: node, JobID: job, Account: "nlp", User: "ann", Class: "l4"}},
		Offerings: []cloud.Offering{{InstanceType: "g6.xlarge", Zone: "us-east-1b", Capacity: capacity}}, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	return res.Instances[0].ID
}

func (e *env) waitBill(t *testing.T, id string, open bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if b := e.emu.BillFor(id); len(b) > 0 && b[len(b)-1].Open == open {
			return
		}
	}
	t.Fatalf("%s: bill never became open=%v", id, open)
}

func (e *env) row(t *testing.T, id string) store.Row {
	t.Helper()
	rows, err := e.st.Rows(context.Background(), time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("%s not in the ledger", id)
	return store.Row{}
}

// compare checks the ledger's bill of an instance against the emulator's
// own record: seconds and dollars.
func (e *env) compare(t *testing.T, id string, tolSecs int64) billing.Billed {
	t.Helper()
	r := e.row(t, id)
	bs := r.Bill(time.Now())
	secs, usd, _ := billing.Total(bs)
	var esecs int64
	var eusd float64
	for _, b := range e.emu.BillFor(id) {
		esecs += b.Seconds
		eusd += b.USD
	}
	if d := secs - esecs; d > tolSecs || d < -tolSecs || math.Abs(usd-eusd) > float64(tolSecs)*r.PriceUSD/3600+1e-9 {
		t.Errorf("%s: ledger %d s $%.6f at $%.4f/h, emulator %d s $%.6f (%+v)", id, secs, usd, r.PriceUSD, esecs, eusd, e.emu.BillFor(id))
	}
	return bs[len(bs)-1]
}

// TestSyncBackfillsAndClosesAtEC2Time: an instance burst never recorded
// (a crash after CreateFleet) is backfilled from its tags with the pool's
// spot price; terminated behind burst's back, it is closed at EC2's own
// transition time; with the events queue its bill equals the emulator's
// to the second.
func TestSyncBackfillsAndClosesAtEC2Time(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	id := e.launch(t, "l4-1", 7, capacity.Spot)
	e.waitBill(t, id, true)
	res, err := e.sync(ctx)
	if err != nil || len(res.Backfilled) != 1 || res.Open != 1 {
		t.Fatalf("sync %+v %v", res, err)
	}
	r := e.row(t, id)
	if r.Source != "backfill" || r.Account != "nlp" || r.User != "ann" || r.JobID != "7" || r.Class != "l4" || r.PriceSource != store.PriceSpotHistory || r.ClientToken == "" {
		t.Fatalf("backfilled row %+v", r)
	}
	if _, err := e.prov.TerminateIDs(ctx, []string{id}); err != nil { // the console, say
		t.Fatal(err)
	}
	e.waitBill(t, id, false)
	res, err = e.sync(ctx)
	if err != nil || len(res.Closed) != 1 || res.Open != 0 {
		t.Fatalf("sync %+v %v", res, err)
	}
	r = e.row(t, id)
	if r.EndSource != sizerapi.SourceEC2 || r.EndReason != "Client.UserInitiatedShutdown" || !r.End.Equal(e.emu.BillFor(id)[0].End) {
		t.Fatalf("closed row %+v, bill %+v", r, e.emu.BillFor(id))
	}
	e.compare(t, id, 0)
}

// TestSpotReclaimWaived: EC2 reclaims a spot instance in its first hour;
// the ledger, like EC2, charges nothing for it.
func TestSpotReclaimWaived(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	id := e.launch(t, "l4-2", 8, capacity.Spot)
	e.waitBill(t, id, true)
	if err := e.emu.Interrupt(id); err != nil {
		t.Fatal(err)
	}
	e.waitBill(t, id, false)
	if _, err := e.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if last := e.compare(t, id, 0); !last.Waived || last.USD != 0 {
		t.Fatalf("reclaimed: %+v", last)
	}
}

// TestBurstEndCorrected: burst records a termination at its own clock; EC2's
// transition time replaces it. Without the events queue billing runs from
// the launch (pending) time: longer than EC2's by the boot, never shorter.
func TestBurstEndCorrected(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	id := e.launch(t, "l4-3", 9, capacity.OnDemand)
	launched := e.emu.Instances()[0].LaunchTime
	if err := e.st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: id, Node: "l4-3", InstanceType: "g6.xlarge", Zone: "us-east-1b", Capacity: "on-demand", Account: "nlp", Time: launched}, 0.8048); err != nil {
		t.Fatal(err)
	}
	e.waitBill(t, id, true)
	if _, err := e.prov.TerminateIDs(ctx, []string{id}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.RecordEnd(ctx, id, time.Now().Add(3*time.Second), sizerapi.SourceBurst, ""); err != nil {
		t.Fatal(err)
	}
	e.waitBill(t, id, false)
	if _, err := e.sync(ctx); err != nil {
		t.Fatal(err)
	}
	r := e.row(t, id)
	bill := e.emu.BillFor(id)[0]
	if r.EndSource != "ec2" || !r.End.Equal(bill.End) {
		t.Fatalf("row %+v bill %+v", r, bill)
	}
	secs, _, _ := billing.Total(r.Bill(time.Now()))
	if extra := secs - bill.Seconds; extra < 0 || extra > 3 {
		t.Errorf("without events: %d s against EC2's %d (boot 1.5 s)", secs, bill.Seconds)
	}
	// an interval EC2 never had is closed as missing after the grace period
	if err := e.st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: "i-0ghost000000000000", InstanceType: "g6.xlarge", Account: "nlp", Time: time.Now().Add(-time.Minute)}, 1); err != nil {
		t.Fatal(err)
	}
	res, err := e.sync(ctx)
	if err != nil || len(res.Missing) != 1 || res.Open != 0 {
		t.Fatalf("sync %+v %v", res, err)
	}
}

// TestInstanceInitiatedShutdown: a spot instance that powers itself off
// (its OS, say a node's own shutdown) is terminated by EC2 with
// Client.InstanceInitiatedShutdown: closed at that time and charged (the
// waiver is only for EC2's reclaims).
func TestInstanceInitiatedShutdown(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	id := e.launch(t, "l4-4", 10, capacity.Spot)
	e.waitBill(t, id, true)
	time.Sleep(1100 * time.Millisecond)
	if err := e.emu.Shutdown(id); err != nil {
		t.Fatal(err)
	}
	e.waitBill(t, id, false)
	if _, err := e.sync(ctx); err != nil {
		t.Fatal(err)
	}
	r := e.row(t, id)
	if r.EndReason != "Client.InstanceInitiatedShutdown" || r.EndSource != "ec2" {
		t.Fatalf("row %+v", r)
	}
	if last := e.compare(t, id, 0); last.Waived || last.USD == 0 {
		t.Fatalf("self-terminated spot instance not charged: %+v", last)
	}
}

// pumpStateChanges stands for burst-sizer serve's reader of the EventBridge
// queue (internal/notices, whose consumer tests cover the reading): until
// the queue is empty, each state change, parsed by the one parser of EC2's
// events, goes to the store as serve's StateChange hook sends it.
func pumpStateChanges(ctx context.Context, t *testing.T, q *sqs.Client, url string, st *store.Store) {
	for ctx.Err() == nil {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatalf("reading the events queue: %v", err)
		}
		if len(out.Messages) == 0 {
			return
		}
		for _, m := range out.Messages {
			ev, err := ec2events.Parse([]byte(aws.ToString(m.Body)), ec2events.Expect{Account: ec2emu.DefaultAccount, Region: "us-east-1"})
			if err == nil && ev.Kind == ec2events.StateChange {
				if err := st.RecordState(ctx, ev.InstanceID, ev.State, ev.Time); err != nil && ctx.Err() == nil {
					t.Errorf("recording %s %s: %v", ev.InstanceID, ev.State, err)
				}
			}
			q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
		}
	}
}
