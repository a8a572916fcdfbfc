package imds

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/harness"
)

const metadataMock = "github.com/aws/amazon-ec2-metadata-mock/cmd/ec2-metadata-mock@v1.13.0"

// buildMetadataMock builds AWS's amazon-ec2-metadata-mock v1.13.0 from the
// Go module proxy (or the module cache when offline). Without it the test
// fails under BURST_REQUIRE_TOOLS=1 and skips loudly otherwise.
func buildMetadataMock(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	cmd := exec.Command("go", "install", metadataMock)
	cmd.Dir = bin // outside this module: go.mod is not consulted or changed
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("cannot build %s (offline with a cold module cache?): %v\n%s", metadataMock, err, out)
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIP (set BURST_REQUIRE_TOOLS=1 to make this fatal): " + msg)
	}
	return filepath.Join(bin, "ec2-metadata-mock")
}

// rawGet fetches a document from an IMDSv2 endpoint with plain net/http.
func rawGet(t *testing.T, base, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, base+"/latest/api/token", nil)
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	req, _ = http.NewRequest(http.MethodGet, base+"/latest/meta-data/"+path, nil)
	req.Header.Set("X-aws-ec2-metadata-token", string(tok))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestContractEC2MetadataMock runs the real amazon-ec2-metadata-mock binary
// (IMDSv2 only, rebalance after 2 s, stop notice after 4 s) and checks that
// the client reads it the same way as the test server in imds_test.go
// serving the very bytes the mock sent.
func TestContractEC2MetadataMock(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP in -short: builds and runs ec2-metadata-mock")
	}
	bin := buildMetadataMock(t)
	port := harness.LocalPort(t)
	const termTime, rebTime = "2026-11-29T13:31:21Z", "2026-11-29T13:29:21Z"
	var logs bytes.Buffer
	cmd := exec.Command(bin, "-n", "127.0.0.1", "-p", fmt.Sprint(port), "-I", "-d", "4", "--rebalance-delay-sec", "2",
		"spot", "-a", "stop", "-t", termTime, "-r", rebTime)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+cmd.Dir)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("ec2-metadata-mock output:\n%s", logs.String())
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if cmd.ProcessState != nil || i > 500 {
			t.Fatalf("ec2-metadata-mock did not listen on %d: %v", port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx := context.Background()
	mock := New(Options{Endpoint: base})

	// Before the delays: nothing.
	if _, ok, err := mock.InstanceAction(ctx); ok || err != nil {
		t.Fatalf("before delay: notice ok=%v err=%v, want none", ok, err)
	}
	// IMDSv2 only: a GET without a token is refused.
	resp, err := http.Get(base + "/latest/meta-data/instance-id")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET without token: %s, want 401", resp.Status)
	}

	// Poll the mock like the agent does until both notices arrived.
	var got []Notice
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p := &Poller{Client: mock, Interval: 200 * time.Millisecond, Handle: func(_ context.Context, n Notice) {
		got = append(got, n)
		if n.InstanceAction != nil {
			cancel()
		}
	}}
	p.Run(pctx)
	if len(got) != 2 || got[0].Rebalance == nil || got[1].InstanceAction == nil {
		t.Fatalf("notices from ec2-metadata-mock = %+v, want a rebalance then an instance action", got)
	}
	wantAction := InstanceAction{Action: "stop", Time: time.Date(2026, 11, 29, 13, 31, 21, 0, time.UTC)}
	if *got[1].InstanceAction != wantAction {
		t.Fatalf("instance action = %+v, want %+v", *got[1].InstanceAction, wantAction)
	}
	if !got[0].Rebalance.NoticeTime.Equal(time.Date(2026, 11, 29, 13, 29, 21, 0, time.UTC)) {
		t.Fatalf("rebalance = %+v, want notice time %s", *got[0].Rebalance, rebTime)
	}
	mockID, err := mock.InstanceID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Serve the mock's exact bytes from our own IMDSv2 server: same result.
	f := newFakeIMDS(t)
	for _, path := range []string{"spot/instance-action", "events/recommendations/rebalance", "instance-id"} {
		code, body := rawGet(t, base, path)
		if code != http.StatusOK {
			t.Fatalf("mock %s: status %d", path, code)
		}
		t.Logf("mock %s: %s", path, body)
		f.set(path, string(body))
	}
	own := New(Options{Endpoint: f.srv.URL})
	a, ok, err := own.InstanceAction(ctx)
	if err != nil || !ok || a != *got[1].InstanceAction {
		t.Fatalf("own server instance action = %+v %v %v, mock gave %+v", a, ok, err, *got[1].InstanceAction)
	}
	r, ok, err := own.Rebalance(ctx)
	if err != nil || !ok || r != *got[0].Rebalance {
		t.Fatalf("own server rebalance = %+v %v %v, mock gave %+v", r, ok, err, *got[0].Rebalance)
	}
	if id, err := own.InstanceID(ctx); err != nil || id != mockID {
		t.Fatalf("own server instance id = %q %v, mock gave %q", id, err, mockID)
	}
}
