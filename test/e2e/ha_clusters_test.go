package e2e

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// TestHATwoClustersShareABudget: two Slurm clusters (each its own
// slurmctld, nodes and burst-sizer; burst cluster.name east and west, so
// each sizer leads its own cluster) on one PostgreSQL, their burst.yaml
// giving both the same budget for account "shared": 1.5 times one job's
// reservation (a one-minute job on one on-demand g6.xlarge).
//
// Both clusters launch into ONE EC2 emulator: one AWS account and region,
// as an organisation's clusters in one region share an account and its
// bill. That is the natural case and the harder one: every DescribeInstances
// sees the other cluster's instances (burst must keep to its
// burst:cluster tag, or a reconciler ends the other's nodes), every
// EventBridge rule gets every instance's events (each cluster's queue is
// its own, as burst-slurm-conf's CloudFormation makes it), instance ids are
// unique across both, and the ledger (one store) is checked against one
// bill covering both clusters' instances. Two emulators would hand out the
// same instance ids to both clusters and hide all of that.
//
// East runs a job of "shared" while west runs one of another account
// (both clusters' node l4-1 and job 1 live at once). East's job spends at
// least one minute of g6.xlarge (EC2's 60 s minimum), so what is left of
// the budget no longer covers a second reservation: west's next job of
// "shared" is held by west's own resume with the budget reason (squeue's
// JobHeld*, the AdminComment naming the account and its spend), nothing
// launches for it while west's leader keeps reconciling, and west's sizer
// reports east's spend, to the cent of EC2's bill. The end-of-test ledger
// check covers both clusters' instances.
func TestHATwoClustersShareABudget(t *testing.T) {
	versionBlind(t)
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	const limit = time.Minute // the jobs' --time
	var price, capUSD float64
	cluster := func(name string) stack.Options {
		return stack.Options{Configure: func(c *config.Config) {
			c.Cluster.Name = name
			c.Interruptions.QueueURL = "https://sqs." + c.Cluster.Region + ".amazonaws.com/" + ec2emu.DefaultAccount + "/burst-" + name + "-interruptions"
			c.Sizer.Store = config.SizerStore{Driver: "postgres", URL: dsn}
			c.Sizer.ReconcileInterval = config.D(5 * time.Second)
			price = onDemandL4(c)
			capUSD = 1.5 * price * limit.Hours()
			c.Budgets = append(c.Budgets, config.Budget{Account: "shared", MonthlyUSD: capUSD})
		}}
	}
	ss := startStacks(t, cluster("east"), cluster("west"))
	east, west := ss[0], ss[1]
	for _, s := range ss {
		eventually(t, time.Minute, "cluster "+s.Cfg.Cluster.Name+"'s sizer leading it", func() bool {
			return strings.Contains(readFile(s.SizerLogPath()), "leading the sizers")
		})
	}

	e1 := sbatch(t, east, "--account=shared", "--gres=gpu:1", "--constraint=l4", "--time=1", "--wrap", "sleep 5")
	w1 := sbatch(t, west, "--account=other", "--gres=gpu:1", "--constraint=l4", "--time=1", "--wrap", "sleep 5")
	waitJob(t, east, e1, 3*time.Minute, "COMPLETED")
	waitJob(t, west, w1, 3*time.Minute, "COMPLETED")
	for _, s := range ss {
		if n := len(s.Instances()); n != 1 {
			t.Fatalf("cluster %s launched %d instances for its one job, want 1", s.Cfg.Cluster.Name, n)
		}
	}

	// east's job has spent what the budget no longer fits a reservation
	// beside: west's next job of the account is held, by west's resume
	w2 := sbatch(t, west, "--account=shared", "--gres=gpu:1", "--constraint=l4", "--time=1", "--wrap", "sleep 5")
	var reason, comment string
	eventually(t, 2*time.Minute, "west's job of the shared account held by the budget", func() bool {
		var st string
		st, reason, comment = jobInfo(west, w2)
		return st == "PENDING" && held(reason) && strings.Contains(comment, "monthly budget spent or reserved")
	})
	t.Logf("west's job %s: %s, %s", w2, reason, comment)
	if !strings.Contains(comment, "account shared has $") {
		t.Errorf("the hold does not name the account and its spend: %q", comment)
	}
	// it stays held and nothing launches for it while west's leader runs
	// its passes (ledger sync and the release of held jobs, every 5 s)
	n0 := ledgerSyncsOf(west, "west")
	eventually(t, 2*time.Minute, "three more ledger syncs of west's leader", func() bool { return ledgerSyncsOf(west, "west") >= n0+3 })
	if st, reason, _ := jobInfo(west, w2); st != "PENDING" || !held(reason) {
		t.Errorf("west's job %s is %s (%s), want still held", w2, st, reason)
	}
	for _, in := range west.Instances() {
		if in.Tags[ec2p.TagJobID] == w2 {
			t.Errorf("instance %s launched for the held job %s", in.ID, w2)
		}
	}

	// west's sizer sees east's spend: the account's figure is EC2's bill
	// of east's instance, once east's leader settled it
	eventually(t, 2*time.Minute, "east's instance terminated and billed", func() bool { return emuSettled(east) })
	ec, err := east.SizerClient(east.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ec.LedgerSync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var bill float64
	for _, b := range east.Emu.Bill() {
		if b.InstanceID == east.Instances()[0].ID {
			bill += b.USD
		}
	}
	wc, err := west.SizerClient(west.Token)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := wc.Budgets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	spent := math.NaN()
	for _, b := range bs {
		if b.Account == "shared" {
			spent = b.SpentUSD
			if b.MonthlyUSD != capUSD || b.RemainingUSD >= price*limit.Hours() {
				t.Errorf("west's budget of shared: %+v; want cap $%.4f with less than one reservation ($%.4f) left", b, capUSD, price*limit.Hours())
			}
		}
	}
	if math.IsNaN(spent) || math.Abs(spent-bill) > price/3600+1e-9 {
		t.Errorf("west's sizer reports $%v spent by shared; EC2 billed east's instance $%.6f", spent, bill)
	}
	t.Logf("shared: cap $%.4f, east's job spent $%.4f (EC2 $%.4f), one reservation $%.4f", capUSD, spent, bill, price*limit.Hours())
	for _, s := range ss {
		assertNoDoubleLaunch(t, s)
	}
}

// ledgerSyncsOf counts a cluster's ledger syncs as EC2 sees them: the
// DescribeInstances calls filtered by the cluster's tag alone (ListAll;
// the reconciler and launches add a state or node filter). The leader's
// ledger sync and its release of held jobs run every
// sizer.reconcile_interval.
func ledgerSyncsOf(s *stack.Stack, cluster string) int {
	n := 0
	for _, c := range s.Emu.Calls() {
		p := c.Params
		if c.Action == "DescribeInstances" && c.Code == "" && p.Get("Filter.1.Name") == "tag:"+ec2p.TagCluster &&
			p.Get("Filter.1.Value.1") == cluster && p.Get("Filter.2.Name") == "" {
			n++
		}
	}
	return n
}
