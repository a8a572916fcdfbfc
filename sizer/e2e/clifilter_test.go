// Package e2e drives real sbatch (the Slurm version test/harness runs) through the
// cli_filter.lua that internal/clifilter generates and the burst-sizer
// binary built from this tree.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/clifilter"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/munge"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/server"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/test/harness"
)

const fragment = `
NodeName=l4-[1-4] CPUs=1 RealMemory=1000 State=CLOUD Feature=burst,l4 Gres=gpu:l4:1
NodeName=a10g-[1-4] CPUs=1 RealMemory=1000 State=CLOUD Feature=burst,a10g Gres=gpu:a10g:1
NodeName=cpu-1 CPUs=1 RealMemory=1000 State=CLOUD
PartitionName=gpu Nodes=l4-[1-4],a10g-[1-4] Default=YES MaxTime=INFINITE State=UP
PartitionName=cpu Nodes=cpu-1 MaxTime=INFINITE State=UP
CliFilterPlugins=cli_filter/lua
`

const gres = "AutoDetect=off\nNodeName=l4-[1-4] Name=gpu Type=l4 File={{DEVDIR}}/nvidia0\nNodeName=a10g-[1-4] Name=gpu Type=a10g File={{DEVDIR}}/nvidia1\n"

// writeConfig writes a burst.yaml (the embedded demo with this run's paths,
// and budgets for the accounts "rich" and "broke") and returns its path.
func writeConfig(t *testing.T, dir, sizerURL string) string {
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(config.DemoYAML), &doc); err != nil {
		t.Fatal(err)
	}
	sz := doc["sizer"].(map[string]any)
	sz["token_file"] = filepath.Join(dir, "sizer.token")
	sz["state_dir"] = filepath.Join(dir, "state")
	sz["url"] = sizerURL
	sz["tls"] = map[string]any{"ca_file": filepath.Join(dir, "sizer-ca.pem")}
	sz["identity_cert"] = filepath.Join(dir, "ec2-identity.pem")
	doc["budgets"] = []any{map[string]any{"account": "rich", "monthly_usd": 100000}, map[string]any{"account": "broke", "monthly_usd": 5}}
	doc["fsx"].(map[string]any)["local_dir"] = filepath.Join(dir, "fsx")
	doc["log"].(map[string]any)["file"] = filepath.Join(dir, "burst.log")
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "burst.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(p); err != nil {
		t.Fatalf("test burst.yaml is invalid: %v", err)
	}
	return p
}

// setMungeSocket points burst.yaml's slurm.munge_socket at socket (and
// slurm.node_conf at the cluster's slurm.conf: a configless node would
// need munge's default socket).
func setMungeSocket(t *testing.T, path, socket, slurmConf string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["slurm"].(map[string]any)["munge_socket"] = socket
	doc["slurm"].(map[string]any)["node_conf"] = slurmConf
	if b, err = yaml.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Fatalf("test burst.yaml is invalid: %v", err)
	}
}

func freeURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "https://" + ln.Addr().String()
}

func TestSbatchThroughCliFilter(t *testing.T) {
	sl, err := harness.SelectedSlurm()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sl.Path("/usr/lib/x86_64-linux-gnu/slurm-wlm/cli_filter_lua.so")); err != nil {
		t.Skipf("SKIPPING: Slurm's cli_filter/lua plugin is not installed in %s (Debian slurm-wlm-basic-plugins)", sl)
	}
	dir := t.TempDir()
	// the jobs are an ordinary user's, and Slurm runs the cli_filter (and
	// so burst-sizer route) as that user: it may pass through this
	// directory and run and read what a site makes world-readable (the
	// binary, burst.yaml, the CA, the route credential), never the state
	// directory or the admin token
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "burst-sizer")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/burst-hpc/burst/sizer").CombinedOutput(); err != nil {
		t.Fatalf("building burst-sizer: %v\n%s", err, out)
	}
	// The daemon is down (nothing listens at sizer.url): route decides in-process.
	cfgPath := writeConfig(t, dir, freeURL(t))
	for _, step := range [][]string{{"token", "init"}, {"tls", "init"}} {
		if out, err := exec.Command(bin, append([]string{"--config", cfgPath}, step...)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", step, err, out)
		}
	}
	tok, err := auth.LoadToken(filepath.Join(dir, "sizer.token"))
	if err != nil {
		t.Fatal(err)
	}

	// Account "broke" has spent more than its $5: an instance at $100/h for the last 10 minutes.
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: "i-broke", Node: "a10g-4", InstanceType: "g5.xlarge", Capacity: "on-demand", Account: "broke", Time: now.Add(-10 * time.Minute)}, 100); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	sizerPath := bin
	if os.Getenv("BURST_E2E_TRACE") != "" {
		sizerPath = filepath.Join(dir, "trace.sh")
		os.WriteFile(sizerPath, []byte("#!/bin/sh\nfor a in \"$@\"; do printf '[%s] ' \"$a\"; done >> "+os.Getenv("BURST_E2E_TRACE")+"; echo >> "+os.Getenv("BURST_E2E_TRACE")+"\nexec "+bin+" \"$@\" 2>>"+os.Getenv("BURST_E2E_TRACE")+"\n"), 0o755)
	}
	lua, err := clifilter.Render(clifilter.Options{SizerPath: sizerPath, GlobalArgs: []string{"--config", cfgPath}, Partitions: []string{"gpu"}, DefaultPartition: "gpu", Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := harness.New(t, harness.Options{Fragment: fragment, GresConf: gres, GPUs: 2, Prepare: func(c *harness.Cluster) error {
		return os.WriteFile(filepath.Join(filepath.Dir(c.ConfPath()), "cli_filter.lua"), lua, 0o644)
	}})
	// the submitting user proves who they are to the daemon with MUNGE
	// (sizer.route_auth: munge, the default), through the cluster's munged
	setMungeSocket(t, cfgPath, c.MungeSocket(), c.ConfPath())
	run := func(args ...string) (jobID, stderr string, err error) {
		cmd := c.UserCommand(ctx, c.User(), "sbatch", append([]string{"--parsable"}, args...)...)
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		err = cmd.Run()
		id, _, _ := strings.Cut(strings.TrimSpace(so.String()), ";")
		return id, se.String(), err
	}
	show := func(id string) string {
		out, err := c.Run(ctx, "scontrol", "show", "job", "-o", id)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	comment := "burst: params=1B dataset=20GB workload=finetune precision=bf16 checkpoint=30m"

	// What the sizer decides for this job, asked directly.
	out, err := exec.Command(bin, "--config", cfgPath, "route", "--json", "--gres=gpu:1", "--comment="+comment, "--account=rich").Output()
	if err != nil {
		t.Fatalf("route --json: %v", err)
	}
	var want sizing.Decision
	if err := json.Unmarshal(out, &want); err != nil || want.Class == "" {
		t.Fatalf("route --json printed %q: %v", out, err)
	}

	t.Run("gres and constraint applied", func(t *testing.T) {
		id, se, err := run("--gres=gpu:1", "--account=rich", "--job-name=ft", "--comment="+comment, "--wrap=true")
		if err != nil {
			t.Fatalf("sbatch: %v\n%s", err, se)
		}
		job := show(id)
		t.Logf("sbatch said: %s\njob: %s", strings.TrimSpace(se), job)
		if u := c.User(); !strings.Contains(job, fmt.Sprintf("UserId=%s(%d)", u.Name, u.UID)) {
			t.Errorf("job %s is not the ordinary user %s's: %s", id, u.Name, job)
		}
		if !hasGres(job, "TresPerNode=", want.Gres) && !strings.Contains(job, "TresPerNode="+want.Gres) {
			t.Errorf("job %s lacks GRES %s", id, want.Gres)
		}
		if !strings.Contains(job, "Features="+want.Constraint+" ") {
			t.Errorf("job %s lacks constraint %s", id, want.Constraint)
		}
		if !strings.Contains(se, "burst: "+want.Class) || !strings.Contains(se, "Why:") {
			t.Errorf("user was not told the decision: %q", se)
		}
		c.Run(ctx, "scancel", id)
	})

	t.Run("user constraint is kept", func(t *testing.T) {
		id, se, err := run("--gres=gpu:1", "--account=rich", "--constraint=burst", "--comment="+comment, "--wrap=true")
		if err != nil {
			t.Fatalf("sbatch: %v\n%s", err, se)
		}
		if job := show(id); !strings.Contains(job, "Features=burst&"+want.Constraint+" ") {
			t.Errorf("constraint not combined: %s", job)
		}
		c.Run(ctx, "scancel", id)
	})

	t.Run("--gpus and --gpus-per-node requests", func(t *testing.T) {
		for _, opt := range []string{"--gpus=1", "--gpus-per-node=1"} {
			id, se, err := run(opt, "--account=rich", "--comment="+comment, "--wrap=true")
			if err != nil {
				t.Errorf("sbatch %s: %v\n%s", opt, err, se)
				continue
			}
			job := show(id)
			t.Logf("%s: %s", opt, job)
			if !strings.Contains(job, "Features="+want.Constraint+" ") || !hasGres(job, "", "gpu:"+want.GPUModel+":1") {
				t.Errorf("sbatch %s: constraint or GPU type not applied", opt)
			}
			c.Run(ctx, "scancel", id)
		}
	})

	t.Run("over-budget account held, not decided blind", func(t *testing.T) {
		// with the daemon down the user's route cannot read the state
		// database (0700): it neither refuses nor passes the account's
		// spend blind; burst-resume holds the job at start until it can
		// (the daemon's refusal is the last subtest's)
		id, se, err := run("--gres=gpu:1", "--account=broke", "--wrap=true")
		if err != nil {
			t.Fatalf("sbatch for a capped account with the sizer down: %v\n%s", err, se)
		}
		if !strings.Contains(se, "account broke's budget cannot be checked now") || !strings.Contains(se, "waits held at start") {
			t.Errorf("the user was not told the budget is checked at start: %q", se)
		}
		c.Run(ctx, "scancel", id)
	})

	t.Run("bad metadata refused with its column", func(t *testing.T) {
		_, se, err := run("--gres=gpu:1", "--account=rich", "--comment=burst: params=7Q", "--wrap=true")
		if err == nil || !strings.Contains(se, "column 8") || !strings.Contains(se, "params=7Q") {
			t.Errorf("want refusal naming the bad value, got err=%v stderr=%q", err, se)
		}
	})

	t.Run("hostile values are not run by a shell", func(t *testing.T) {
		// where the user could write it
		canary := filepath.Join(c.Dir(), "work", "pwned")
		id, se, err := run("--gres=gpu:1", "--account=rich", "--job-name=x'; touch "+canary+"; echo '", "--comment=$(touch "+canary+")", "--wrap=true")
		if err != nil {
			t.Fatalf("sbatch: %v\n%s", err, se)
		}
		if _, err := os.Stat(canary); err == nil {
			t.Fatal("a job option was executed by a shell")
		}
		c.Run(ctx, "scancel", id)
	})

	t.Run("other partitions pass untouched", func(t *testing.T) {
		id, se, err := run("-p", "cpu", "--account=broke", "--wrap=true")
		if err != nil {
			t.Fatalf("sbatch to a non-burst partition: %v\n%s", err, se)
		}
		if job := show(id); strings.Contains(job, "Features="+want.Constraint) || strings.Contains(se, "burst:") {
			t.Errorf("non-burst job was changed: %s / %s", job, se)
		}
		c.Run(ctx, "scancel", id)
	})

	t.Run("sizer failure lets the job through unchanged", func(t *testing.T) {
		if err := os.Rename(cfgPath, cfgPath+".away"); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(cfgPath+".away", cfgPath)
		id, se, err := run("--gres=gpu:1", "--account=broke", "--wrap=true")
		if err != nil {
			t.Fatalf("sbatch with the sizer failing should pass: %v\n%s", err, se)
		}
		job := show(id)
		if strings.Contains(job, "Features="+want.Constraint) || !strings.Contains(se, "did not answer") {
			t.Errorf("job changed or user not told: %s / %q", job, se)
		}
		c.Run(ctx, "scancel", id)
	})

	t.Run("sizer timeout lets the job through unchanged", func(t *testing.T) {
		slow := filepath.Join(dir, "slow-sizer.sh")
		if err := os.WriteFile(slow, []byte("#!/bin/sh\n# answers only after 30 s: a refusal, so a timeout that did not fire fails the test\nsleep 30\nprintf 'burst-sizer-filter 1\\naction=refuse\\nmessage=too late\\n'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		slowLua, err := clifilter.Render(clifilter.Options{SizerPath: slow, Partitions: []string{"gpu"}, DefaultPartition: "gpu", Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		luaPath := filepath.Join(filepath.Dir(c.ConfPath()), "cli_filter.lua")
		if err := os.WriteFile(luaPath, slowLua, 0o644); err != nil {
			t.Fatal(err)
		}
		// Slurm reloads the script when its mtime changes; make sure it does.
		future := time.Now().Add(2 * time.Second)
		os.Chtimes(luaPath, future, future)
		defer func() {
			os.WriteFile(luaPath, lua, 0o644)
			later := time.Now().Add(4 * time.Second)
			os.Chtimes(luaPath, later, later)
		}()
		t0 := time.Now()
		id, se, err := run("--gres=gpu:1", "--account=broke", "--wrap=true")
		took := time.Since(t0)
		if err != nil {
			t.Fatalf("sbatch with a hung sizer should pass: %v\n%s", err, se)
		}
		if job := show(id); strings.Contains(job, "Features=a10g") || strings.Contains(job, "Features=l4") || !strings.Contains(se, "did not answer") {
			t.Errorf("job changed or user not told: %s / %q", job, se)
		}
		t.Logf("sbatch returned after %v with the sizer hung", took.Round(time.Millisecond))
		c.Run(ctx, "scancel", id)
	})

	t.Run("daemon answers when it is up", func(t *testing.T) {
		cfg, err := config.Load(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(ctx, server.Options{Token: tok, StateDir: cfg.Sizer.StateDir, Budgets: map[string]float64{"rich": 100000, "broke": 5},
			Classes: []sizing.Class{{Name: "l4", GPUModel: "l4", GPUsPerNode: 1, MaxNodes: 4, InstanceTypes: []string{"g6.xlarge"}}}, Region: "us-east-1",
			TLSCertFile: cfg.Sizer.CertPath(), TLSKeyFile: cfg.Sizer.KeyPath(), RouteAuth: munge.Runner{Socket: c.MungeSocket()}})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", strings.TrimPrefix(cfg.Sizer.URL, "https://"))
		if err != nil {
			t.Skipf("sizer URL's port was taken meanwhile: %v", err)
		}
		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- srv.Serve(sctx, ln) }()
		defer func() { stop(); <-done }()
		// The daemon's classes differ from burst.yaml's (only l4), so its answer is recognisable.
		id, se, err := run("--gres=gpu:1", "--account=rich", "--comment="+comment, "--wrap=true")
		if err != nil {
			t.Fatalf("sbatch: %v\n%s", err, se)
		}
		if job := show(id); !strings.Contains(job, "Features=l4 ") || !hasGres(job, "TresPerNode=", "gpu:l4:1") {
			t.Errorf("daemon's decision not applied: %s", job)
		}
		c.Run(ctx, "scancel", id)
		_, se, err = run("--gres=gpu:1", "--account=broke", "--wrap=true")
		if err == nil || !strings.Contains(se, "over its monthly GPU budget") {
			t.Errorf("daemon did not refuse the over-budget account: %v %q", err, se)
		}
		t.Logf("refusal as the user sees it:\n%s", se)
	})
}

// hasGres reports whether scontrol's job text has field (e.g. "TresPerNode=")
// followed by the GRES: "gres:gpu:l4:1" in 22.05, "gres/gpu:l4:1" from 23.02.
func hasGres(job, field, gres string) bool {
	return strings.Contains(job, field+"gres:"+gres) || strings.Contains(job, field+"gres/"+gres)
}
