package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/agent/gpu"
	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/cmdline/cmdlinetest"
	"github.com/burst-hpc/burst/internal/config/configtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// TestRunSpotInterruption runs `burst-agent run` in-process with simulated
// GPUs against a sizer stub, an IMDSv2 stub and stand-in Slurm commands
// (scripts that log their arguments; scontrol --version says 24.11, squeue
// prints a real 24.11 sample with job 5 running on gpu-1, and that job's
// state lines: running on gpu-1, then pending once requeued; scancel plays
// the job writing its marker). It
// checks the wiring: reports attributed to job 5 reach the sizer, and a spot
// notice drains, signals, requeues, releases and powers the node down, in
// that order, and is reported. Real Slurm is exercised by the e2e tests.
func TestRunSpotInterruption(t *testing.T) {
	dir := t.TempDir()
	bin, root, calls := filepath.Join(dir, "bin"), filepath.Join(dir, "ckpt"), filepath.Join(dir, "calls.log")
	os.MkdirAll(bin, 0o755)
	fixture, err := filepath.Abs("../internal/slurm/testdata/24.11/squeue.json")
	if err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{
		"squeue": fmt.Sprintf("#!/bin/bash\ncase \" $* \" in\n*\" -o \"*\" -j \"*) echo '5|PENDING|1||BeginTime' ;;\n"+
			"*\" -o \"*) echo '5|RUNNING|1|gpu-1|None' ;;\n*) cat %q ;;\nesac\n", fixture),
		"scontrol": fmt.Sprintf("#!/bin/bash\n[ \"$1\" = --version ] && { echo 'slurm 24.11.5'; exit 0; }\necho \"scontrol $*\" >> %q\n", calls),
		"scancel": fmt.Sprintf("#!/bin/bash\necho \"scancel $*\" >> %q\nmkdir -p %q && echo step=3 > %q\n",
			calls, filepath.Join(root, "5"), filepath.Join(root, "5", ".checkpointed-0")),
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var recs []sizerapi.Record
	var notices []sizerapi.Interruption
	tok, err := auth.IssueNode(strings.Repeat("k", 64), auth.NodeClaims{InstanceID: "i-0123456789abcdef0", Node: "gpu-1", Expires: time.Now().Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	ca := configtest.WriteCA(t, filepath.Join(dir, "sizer-ca.pem"))
	sizer := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == InterruptionPath && r.Header.Get("Authorization") == "Bearer "+tok {
			var in sizerapi.Interruption
			if json.NewDecoder(r.Body).Decode(&in) != nil {
				http.Error(w, "bad notice", http.StatusBadRequest)
				return
			}
			mu.Lock()
			notices = append(notices, in)
			mu.Unlock()
			w.Write([]byte("{}"))
			return
		}
		var b sizerapi.ReportBatch
		if r.URL.Path != ReportPath || r.Header.Get("Authorization") != "Bearer "+tok || json.NewDecoder(r.Body).Decode(&b) != nil || b.InstanceID != "i-0test" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		recs = append(recs, b.Records...)
		mu.Unlock()
	}))
	sizer.TLS = ca.ServerConfig(t)
	sizer.StartTLS()
	defer sizer.Close()
	var action sync.Map
	imdsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", "21600")
			w.Write([]byte("tk"))
			return
		}
		switch r.URL.Path {
		case "/latest/meta-data/instance-id":
			w.Write([]byte("i-0test"))
		case "/latest/meta-data/spot/instance-action":
			if v, ok := action.Load("doc"); ok {
				w.Write([]byte(v.(string)))
				return
			}
			http.NotFound(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	defer imdsSrv.Close()
	cred := filepath.Join(dir, "token")
	os.WriteFile(cred, []byte(tok+"\n"), 0o400)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"burst-agent", "run", "--node", "gpu-1", "--sizer-url", sizer.URL,
			"--credential-file", cred, "--sizer-ca-file", filepath.Join(dir, "sizer-ca.pem"), "--imds-endpoint", imdsSrv.URL, "--imds-poll", "50ms", "--sample-interval", "50ms",
			"--interval", "100ms", "--state-dir", filepath.Join(dir, "state"), "--gpu-source", "sim", "--sim-gpus", "2",
			"--checkpoint-root", root, "--grace", "20s", "--slurm-bin-dir", bin}, os.Environ(), io.Discard, os.Stderr)
	}()
	waitFor := func(what string, cond func() bool) {
		giveUp := time.Now().Add(time.Minute) // hang guard only
		for !cond() {
			select {
			case code := <-done:
				t.Fatalf("agent exited early: status %d", code)
			default:
			}
			if time.Now().After(giveUp) {
				t.Fatalf("gave up waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	hasJob5 := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if r.Kind == sizerapi.KindGPU && len(r.GPUs) == 2 && len(r.GPUs[0].JobIDs) == 1 && r.GPUs[0].JobIDs[0] == 5 {
				return true
			}
		}
		return false
	}
	waitFor("a report attributing GPU 0 to job 5", hasJob5)
	action.Store("doc", fmt.Sprintf(`{"action":"terminate","time":%q}`, time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339)))
	waitFor("an interruption report", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if r.Kind == sizerapi.KindInterruption {
				return true
			}
		}
		return false
	})
	// the report leaves before the hand-back (which ends the instance)
	waitFor("the node handed back", func() bool {
		b, _ := os.ReadFile(calls)
		return strings.Contains(string(b), "state=POWER_DOWN_FORCE")
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("agent exit status %d", code)
	}
	b, _ := os.ReadFile(calls)
	const startTime = "2026-12-01T11:30:16Z" // job 5's start in the squeue fixture
	want := []string{
		"scontrol update nodename=gpu-1 state=DRAIN reason=burst: spot interruption i-0test",
		"scancel --signal=USR1 --batch 5",
		// the note the epilog reads to hold the job's other nodes
		"scontrol update jobid=5 admincomment=burst-requeue lost=gpu-1 instance=i-0test run=" + startTime + " restart=0 by=agent: spot interruption",
		"scontrol requeue 5",
		"scontrol update jobid=5 starttime=now",
		"scontrol update nodename=gpu-1 state=POWER_DOWN_FORCE reason=burst: spot interruption i-0test",
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.Contains(l, " show node ") { // the dead-man switch's reachability reads
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Slurm calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mu.Lock()
	defer mu.Unlock()
	var ev *sizerapi.Event
	var last uint64
	for _, r := range recs {
		if r.Seq <= last {
			// a resend of a batch whose answer was cut off (the agent
			// stopped mid-send); the sizer drops it by node and sequence
			continue
		}
		if r.Seq != last+1 {
			t.Fatalf("sizer got seq %d after %d", r.Seq, last)
		}
		last = r.Seq
		if r.Kind == sizerapi.KindInterruption {
			ev = r.Event
		}
	}
	if len(notices) != 1 || notices[0].InstanceID != "i-0test" || notices[0].Node != "gpu-1" || notices[0].Action != "terminate" {
		t.Fatalf("notices to the sizer = %+v, want one terminate for i-0test on gpu-1", notices)
	}
	if ev == nil || ev.InstanceID != "i-0test" || len(ev.Jobs) != 1 || !ev.Jobs[0].Checkpointed || !ev.Jobs[0].Released || ev.Error != "" {
		t.Fatalf("interruption report = %+v", ev)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	var stderr strings.Builder
	code := run(context.Background(), []string{"burst-agent", "run", "--node", "n", "--sizer-url", "ftp://x", "--gpu-source", "foo", "--interval", "0s"}, nil, io.Discard, &stderr)
	if code != 2 {
		t.Fatalf("bad flags: exit status %d, want 2; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"--sizer-url", "--gpu-source", "--interval"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("error %q does not mention %s", stderr.String(), want)
		}
	}
}

func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	if missing := cmdlinetest.MissingEnvVars(newApp(io.Discard, io.Discard)); len(missing) > 0 {
		t.Fatalf("flags without an environment variable: %v", missing)
	}
}

// TestNoSimulationFallback: the agent simulates GPUs only when told to;
// "auto" is gone, and without NVML (this test binary or machine has none)
// the agent fails with exit status 3 instead of reporting made-up GPUs.
func TestNoSimulationFallback(t *testing.T) {
	var stderr strings.Builder
	code := run(context.Background(), []string{"burst-agent", "run", "--node", "n", "--sizer-url", "http://127.0.0.1:1", "--gpu-source", "auto"}, nil, io.Discard, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "want nvml (real GPUs) or sim") {
		t.Errorf("--gpu-source auto: exit %d\n%s", code, stderr.String())
	}
	if _, err := gpu.Open(); err == nil {
		t.Skip("this machine has a working NVML")
	}
	stderr.Reset()
	dir := t.TempDir()
	code = run(context.Background(), []string{"burst-agent", "run", "--node", "n", "--sizer-url", "https://127.0.0.1:1", "--no-imds", "--dead-man-after", "0",
		"--state-dir", dir, "--slurm-bin-dir", dir}, nil, io.Discard, &stderr)
	if code != 3 || !strings.Contains(stderr.String(), "opening GPUs") || !strings.Contains(stderr.String(), "drain") {
		t.Errorf("no NVML: exit %d, want 3 and a drain attempt\n%s", code, stderr.String())
	}
}
