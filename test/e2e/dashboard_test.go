package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/tlspin"
	"github.com/burst-hpc/burst/sizer/ui/uitest"
	"github.com/burst-hpc/burst/test/browser"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// TestDashboard drives the demo stack (real Slurm, the EC2 emulator,
// burst-sizer serve) with real jobs, then reads every dashboard page in
// Debian's headless Chromium and checks that each figure it shows equals
// the figure of the read-only API for the same store, cross-checks the
// views against the emulator and Slurm, and checks access: no login, no
// page; an account credential sees only its own account. Screenshots go to
// $BURST_SCREENSHOTS (make screenshots: docs/img) or the test's directory.
//
// Jobs: two 4-GPU runs of one job name that use 1 GPU (right-sizing), a
// job whose name and comment are XSS attempts (account vision), a
// checkpointing job interrupted on spot and requeued, and a long job that
// is running while the Fleet page is read.
func TestDashboard(t *testing.T) {
	if err := browser.Available(); err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	s := start(t, stack.Options{
		Emulator: ec2emu.Options{NoticePeriod: 45 * time.Second}, // past the agent's 20 s reserve: time to checkpoint
		Configure: func(c *config.Config) {
			c.Agent.ReportInterval = config.D(2 * time.Second)
			c.Classes = append(c.Classes, config.Class{Name: "l4x4", GPUModel: "l4", GPUsPerNode: 4, MaxNodes: 2, InstanceTypes: []string{"g6.12xlarge"}, Capacity: "spot-then-on-demand"})
			// budgets are hard caps: a job starts only when its
			// reservation (on-demand price x time limit) fits; vision's
			// one-minute job fits this one
			c.Budgets = append(c.Budgets, config.Budget{Account: "vision", MonthlyUSD: 0.05})
		},
	})
	ctx := context.Background()
	shots := os.Getenv("BURST_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if !filepath.IsAbs(shots) {
		shots = filepath.Join("..", "..", shots) // relative to the repository root (make screenshots)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	// the jobs
	evalA := sbatch(t, s, "--gres=gpu:4", "--constraint=l4x4", "--account=demo", "--job-name=nightly-eval", "--comment=burst: workload=inference", "--wrap", "sleep 10")
	evalB := sbatch(t, s, "--gres=gpu:4", "--constraint=l4x4", "--account=demo", "--job-name=nightly-eval", "--comment=burst: workload=inference", "--wrap", "sleep 10")
	xss := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--account=vision", "--time=1", "--job-name="+xssJobName, "--comment="+xssComment, "--wrap", "sleep 6")
	script := jobScript(t, s, "../../examples/train/train.sh")
	cmd := s.Cluster.UserCommand(ctx, s.Cluster.User(), "sbatch", "--parsable", "--gres=gpu:1", "--constraint=a10g", "--account=demo", script)
	cmd.Env = append(cmd.Env, "TRAIN_STEPS=14", "TRAIN_STEP_SECONDS=1", "TRAIN_CHECKPOINT_EVERY=3",
		"BURST_CHECKPOINT_ROOT="+filepath.Join(s.Cfg.FSx.MountPoint, s.Cfg.FSx.CheckpointDir))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sbatch train.sh: %v", err)
	}
	train := strings.TrimSpace(string(out))
	long := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--account=demo", "--job-name=long-run", "--wrap", "sleep 900")
	t.Cleanup(func() { s.Cluster.Run(context.Background(), "scancel", long) })

	// interrupt the training job's spot instance once it has trained a little
	waitJob(t, s, train, 2*time.Minute, "RUNNING")
	trainLog := filepath.Join(s.Cluster.Dir(), "work", "train-"+train+".out")
	eventually(t, time.Minute, "4 training steps", func() bool {
		b, _ := os.ReadFile(trainLog)
		return strings.Count(string(b), " done") >= 4
	})
	var first ec2emu.Instance
	for _, in := range liveInstances(s) {
		if in.Tags[ec2p.TagJobID] == train {
			first = in
		}
	}
	if first.ID == "" || first.Lifecycle != "spot" {
		t.Fatalf("the training job's instance: %+v", first)
	}
	if err := s.Emu.Interrupt(first.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the training job requeued by burst-agent", func() bool {
		o, _ := s.Cluster.Run(ctx, "scontrol", "show", "job", train)
		return strings.Contains(o, "Restarts=1")
	})
	for _, id := range []string{evalA, evalB, xss, train} {
		waitJob(t, s, id, 4*time.Minute, "COMPLETED")
	}
	// Slurm's submit times (the requeued job's is its last attempt's),
	// while slurmctld still holds the jobs
	submits := map[string]time.Time{}
	for _, id := range []string{evalA, evalB, xss, train} {
		submits[id] = showJob(t, s, id).Submit
	}
	waitJob(t, s, long, time.Minute, "RUNNING")
	// only the long job's instance is left
	var longInst ec2emu.Instance
	eventually(t, 90*time.Second, "every instance but the long job's terminated", func() bool {
		live := liveInstances(s)
		if len(live) != 1 || live[0].Tags[ec2p.TagJobID] != long {
			return false
		}
		longInst = live[0]
		return true
	})

	// vision's credential as an admin makes it (README: the dashboard)
	accountToken := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(binDir, "burst-sizer"), append([]string{"--config", s.CfgPath, "token", "account"}, args...)...).Output()
		if err != nil {
			t.Fatalf("burst-sizer token account %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	vision := accountToken(t, "vision")
	admin := s.Token
	base := s.Cfg.Sizer.URL
	hc, err := tlspin.LoadHTTPClient(s.Cfg.Sizer.TLS.CAFile, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	spki, err := certSPKI(s.Cfg.Sizer.CertPath())
	if err != nil {
		t.Fatal(err)
	}
	api := func(t *testing.T, tok, path string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	br, err := browser.Start(bctx, browser.Options{Width: 1280, Height: 900, TrustSPKI: []string{spki}, LogFile: filepath.Join(s.Dir, "chromedriver.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	nav := func(t *testing.T, path string) string {
		t.Helper()
		if err := br.Navigate(bctx, base+path); err != nil {
			t.Fatalf("navigating to %s: %v", path, err)
		}
		u, err := br.URL(bctx)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(u, base)
	}
	figures := func(t *testing.T) []uitest.Figure {
		t.Helper()
		var raw [][]string
		if err := br.Exec(bctx, `return Array.from(document.querySelectorAll('[data-k]')).map(e => [e.getAttribute('data-k'), e.textContent, e.getAttribute('datetime') || ''])`, &raw); err != nil {
			t.Fatal(err)
		}
		out := make([]uitest.Figure, len(raw))
		for i, r := range raw {
			out[i] = uitest.Figure{Key: r[0], Text: r[1], DateTime: r[2]}
		}
		return out
	}
	// check reads the API view, then the page, and compares them; a state
	// that moved in between (a node powering down) is read again, up to 5
	// times. It returns the view and the page's figures.
	check := func(t *testing.T, tok, page, view string) (map[string]any, []uitest.Figure) {
		t.Helper()
		var bad []string
		for try := 0; try < 5; try++ {
			code, js := api(t, tok, view)
			if code != 200 {
				t.Fatalf("GET %s: %d %s", view, code, js)
			}
			if got := nav(t, page); got != page {
				t.Fatalf("navigating to %s landed on %s", page, got)
			}
			figs := figures(t)
			if len(figs) == 0 {
				t.Fatalf("%s shows no figure", page)
			}
			if bad = uitest.Compare(js, figs); len(bad) == 0 {
				var v map[string]any
				json.Unmarshal(js, &v)
				t.Logf("%s: %d figures equal %s", page, len(figs), view)
				return v, figs
			}
			time.Sleep(time.Second)
		}
		t.Fatalf("%s does not show what %s says:\n%s", page, view, strings.Join(bad, "\n"))
		return nil, nil
	}
	shot := func(t *testing.T, name string) {
		t.Helper()
		b, err := br.Screenshot(bctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := writePNG(filepath.Join(shots, name), b); err != nil {
			t.Fatal(err)
		}
	}

	// no login: every page sends the browser to the login page, the API refuses
	for _, p := range []string{"/ui/fleet", "/ui/jobs", "/ui/jobs/" + train, "/ui/money", "/ui/rightsizing"} {
		if got := nav(t, p); got != "/ui/login" {
			t.Errorf("without a login %s shows %s, want the login page", p, got)
		}
	}
	for _, p := range []string{"/v1/fleet", "/v1/jobs", "/v1/money", "/v1/rightsizing", "/v1/report"} {
		if code, _ := api(t, "", p); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d", p, code)
		}
	}
	shot(t, "dash-login.png")
	login := func(t *testing.T, tok string) {
		t.Helper()
		nav(t, "/ui/login")
		e, err := br.Find(bctx, "#token")
		if err != nil {
			t.Fatal(err)
		}
		if err := br.Type(bctx, e, tok); err != nil {
			t.Fatal(err)
		}
		b, _ := br.Find(bctx, "#login")
		if err := br.Click(bctx, b); err != nil {
			t.Fatal(err)
		}
		var u string
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if u, _ = br.URL(bctx); strings.HasSuffix(u, "/ui/fleet") {
				return
			}
		}
		var text string
		br.Exec(bctx, `return document.body.innerText`, &text)
		t.Fatalf("login did not reach /ui/fleet: %s shows\n%s", u, text)
	}
	login(t, admin)
	var jsCookie string
	if err := br.Exec(bctx, `return document.cookie`, &jsCookie); err != nil {
		t.Fatal(err)
	}
	if jsCookie != "" {
		t.Errorf("the page's script can read cookies %q; the session cookie must be HttpOnly", jsCookie)
	}

	t.Run("fleet", func(t *testing.T) {
		v, figs := check(t, admin, "/ui/fleet", "/v1/fleet")
		if n := int(v["instances"].(float64)); n != 1 {
			t.Errorf("the fleet shows %d live instances; the emulator runs 1", n)
		}
		// the long job's node as the emulator and Slurm see it
		node := longInst.Tags[ec2p.TagNode]
		found := false
		for ci, c := range v["classes"].([]any) {
			for ni, n := range c.(map[string]any)["nodes"].([]any) {
				nm := n.(map[string]any)
				if nm["node"] != node {
					continue
				}
				found = true
				want := map[string]string{"instance_id": longInst.ID, "instance_type": longInst.InstanceType, "zone": longInst.Zone, "capacity": longInst.Lifecycle, "job_id": long, "account": "demo", "job_name": "long-run"}
				for k, w := range want {
					if nm[k] != w {
						t.Errorf("fleet node %s %s = %v, the emulator/Slurm say %s", node, k, nm[k], w)
					}
					if uitest.Count(figs, fmt.Sprintf("^classes/%d/nodes/%d/%s$", ci, ni, k)) != 1 {
						t.Errorf("the page does not show %s of node %s", k, node)
					}
				}
			}
		}
		if !found {
			t.Errorf("the fleet view has no node %s", node)
		}
		checkClassWaits(t, v, figs)
		shot(t, "dash-fleet.png")
	})

	// the long job ends; every instance is gone and the store settles
	if _, err := s.Cluster.Run(ctx, "scancel", long); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "every instance terminated and recorded", func() bool {
		if len(liveInstances(s)) != 0 {
			return false
		}
		_, js := api(t, admin, "/v1/fleet")
		var v struct{ Instances int }
		json.Unmarshal(js, &v)
		return v.Instances == 0
	})

	t.Run("jobs", func(t *testing.T) {
		v, figs := check(t, admin, "/ui/jobs", "/v1/jobs")
		rows := map[string]map[string]any{}
		for _, j := range v["jobs"].([]any) {
			jm := j.(map[string]any)
			rows[jm["job_id"].(string)] = jm
		}
		if got := uitest.Count(figs, `^jobs/\d+/job_id$`); got != len(rows) {
			t.Errorf("the page lists %d jobs, the API %d", got, len(rows))
		}
		for _, id := range []string{evalA, evalB, xss, train, long} {
			if rows[id] == nil {
				t.Errorf("job %s is not listed", id)
			}
		}
		for _, id := range []string{evalA, evalB} {
			if j := rows[id]; j != nil && (j["gpus_per_node"] != 4.0 || j["gpus_used"] != 1.0 || j["reported"] != true || j["job_name"] != "nightly-eval") {
				t.Errorf("job %s: %v; want 4 GPUs asked, 1 used (the agent's reports)", id, j)
			}
		}
		if j := rows[train]; j == nil || j["interruptions"].(float64) < 1 || j["requeues"].(float64) < 1 || j["checkpoints"].(float64) < 1 || j["instances"].(float64) < 2 {
			t.Errorf("training job %s: %v; want the interruption, the requeue (Slurm says Restarts=1), the checkpoint and two instances", train, j)
		}
		if j := rows[xss]; j == nil || j["job_name"] != xssJobName {
			t.Errorf("the XSS job: %v", j)
		}
		checkJobWaits(t, rows, figs, submits, evalA, evalB)
		if d, ok := rows[evalA]["decision"].(map[string]any); !ok || d["instance_type"] != "g6.12xlarge" || d["reason"] == "" {
			t.Errorf("job %s's decision: %v", evalA, rows[evalA]["decision"])
		}
		assertInert(t, br, bctx)
		shot(t, "dash-jobs.png")
	})

	t.Run("job pages", func(t *testing.T) {
		v, _ := check(t, admin, "/ui/jobs/"+train, "/v1/jobs/"+train)
		if l, _ := v["interruption_list"].([]any); len(l) < 1 || l[0].(map[string]any)["instance_id"] != first.ID {
			t.Errorf("job %s's interruptions %v; the emulator interrupted %s", train, v["interruption_list"], first.ID)
		}
		shot(t, "dash-job.png")
		v, _ = check(t, admin, "/ui/jobs/"+xss, "/v1/jobs/"+xss)
		if d, _ := v["decision"].(map[string]any); d == nil || d["comment"] != xssComment {
			t.Errorf("the XSS job's decision comment: %v", v["decision"])
		}
		var text string
		br.Exec(bctx, `return document.querySelector('[data-k="decision/comment"]').textContent`, &text)
		if text != xssComment {
			t.Errorf("the comment shows as %q, want the literal text", text)
		}
		assertInert(t, br, bctx)
	})

	t.Run("money", func(t *testing.T) {
		v, _ := check(t, admin, "/ui/money", "/v1/money")
		accounts := map[string]map[string]any{}
		for _, a := range v["accounts"].([]any) {
			am := a.(map[string]any)
			accounts[am["account"].(string)] = am
		}
		if accounts["demo"] == nil || accounts["vision"] == nil || accounts["demo"]["budget_usd"] != 100.0 {
			t.Errorf("accounts %v", accounts)
		}
		if vs := accounts["vision"]; vs != nil && (vs["budget_usd"] != 0.05 || vs["over"] != false || !(vs["spent_usd"].(float64) > 0)) {
			t.Errorf("vision (cap $0.05, one short job) should show its spend under its cap: %v", vs)
		}
		// the instances and their seconds, against the emulator's own record
		emu := s.Emu.Instances()
		if n := int(v["instances"].(float64)); n != len(emu) {
			t.Errorf("money counts %d instances, the emulator launched %d", n, len(emu))
		}
		// the seconds EC2 bills (running segments, 60 s minimum each), from
		// the emulator's own billing record
		var secs float64
		for _, in := range emu {
			for _, l := range s.Emu.BillFor(in.ID) {
				secs += float64(l.Seconds)
			}
		}
		if got := v["instance_hours"].(float64) * 3600; math.Abs(got-secs) > 6*float64(len(emu))+1 {
			t.Errorf("money counts %.0f instance-seconds, the emulator bills %.0f", got, secs)
		}
		if v["saved_vs_on_demand_usd"].(float64) <= 0 || v["saved_vs_idle_timeout_usd"].(float64) <= v["saved_vs_on_demand_usd"].(float64) {
			t.Errorf("savings: %v vs on demand, %v vs idle-timeout", v["saved_vs_on_demand_usd"], v["saved_vs_idle_timeout_usd"])
		}
		shot(t, "dash-money.png")
	})

	t.Run("rightsizing", func(t *testing.T) {
		v, _ := check(t, admin, "/ui/rightsizing", "/v1/rightsizing")
		var item map[string]any
		for _, it := range v["items"].([]any) {
			if im := it.(map[string]any); im["job_name"] == "nightly-eval" {
				item = im
			}
		}
		if item == nil || item["asked_gpus"] != 4.0 || item["used_gpus"] != 1.0 || item["suggested_gpus"] != 1.0 || item["jobs"] != 2.0 ||
			(item["suggested_class"] != "l4" && item["suggested_class"] != "a10g") || item["save_usd_per_month"].(float64) <= 0 {
			t.Errorf("no advice to run nightly-eval on one GPU: %v", v["items"])
		}
		shot(t, "dash-rightsizing.png")
	})

	t.Run("account credential", func(t *testing.T) {
		// the API answers vision for vision only
		if code, _ := api(t, vision, "/v1/jobs/"+evalA); code != http.StatusNotFound {
			t.Errorf("vision reading demo's job %s: %d, want 404", evalA, code)
		}
		for _, p := range []string{"/v1/money?account=demo", "/v1/jobs?account=demo", "/v1/fleet?account=demo"} {
			if code, _ := api(t, vision, p); code != http.StatusForbidden {
				t.Errorf("vision GET %s: %d, want 403", p, code)
			}
		}
		nav(t, "/ui/jobs") // log the admin out through the page's form
		lo, err := br.Find(bctx, `form[action="/ui/logout"] button`)
		if err != nil {
			t.Fatal(err)
		}
		br.Click(bctx, lo)
		if got := nav(t, "/ui/money"); got != "/ui/login" {
			t.Fatalf("after logging out /ui/money shows %s", got)
		}
		login(t, vision)
		for _, pg := range [][2]string{{"/ui/fleet", "/v1/fleet"}, {"/ui/jobs", "/v1/jobs"}, {"/ui/money", "/v1/money"}, {"/ui/rightsizing", "/v1/rightsizing"}} {
			_, figs := check(t, vision, pg[0], pg[1])
			for _, f := range figs {
				if strings.HasSuffix(f.Key, "/account") && f.Text != "vision" {
					t.Errorf("%s as vision shows a row of account %q (%s)", pg[0], f.Text, f.Key)
				}
			}
			var html string
			br.Exec(bctx, `return document.body.innerText`, &html)
			for _, other := range []string{"nightly-eval", "long-run", "demo"} {
				if strings.Contains(html, other) {
					t.Errorf("%s as vision shows %q", pg[0], other)
				}
			}
		}
		_, figs := check(t, vision, "/ui/jobs", "/v1/jobs")
		if n := uitest.Count(figs, `^jobs/\d+/job_id$`); n != 1 {
			t.Errorf("vision sees %d jobs, it ran 1", n)
		}
		for _, p := range []string{"/ui/jobs/" + evalA, "/ui/jobs/" + train} {
			nav(t, p)
			var code string
			br.Exec(bctx, `var e = document.querySelector('[data-error]'); return e ? e.getAttribute('data-error') : ''`, &code)
			if code != "404" {
				t.Errorf("vision opening %s: error %q, want 404", p, code)
			}
		}
		nav(t, "/ui/money?account=demo")
		var code string
		br.Exec(bctx, `var e = document.querySelector('[data-error]'); return e ? e.getAttribute('data-error') : ''`, &code)
		if code != "403" {
			t.Errorf("vision opening demo's money: %q, want 403", code)
		}
	})
	t.Run("a rotated account credential is refused at once", func(t *testing.T) {
		rotated := accountToken(t, "--rotate", "vision")
		if code, body := api(t, vision, "/v1/jobs"); code != http.StatusUnauthorized || !strings.Contains(string(body), "rotated") {
			t.Errorf("vision's credential from before the rotation: %d %s; want 401 saying it was rotated", code, body)
		}
		if code, body := api(t, rotated, "/v1/jobs"); code != http.StatusOK {
			t.Errorf("vision's new credential: %d %s", code, body)
		}
	})
	t.Logf("screenshots in %s", shots)
}
