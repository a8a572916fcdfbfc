package bootstrap

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/config/configtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// identityFakes stand in for an instance's IMDS (identity document and
// signature behind IMDSv2 tokens) and the sizer's identity exchange,
// which here names the node without checking anything (the real exchange
// is tested in sizer/server against the EC2 emulator, and end to end).
type identityFakes struct {
	IMDS, Sizer string
	CA          []byte
	Exchanges   atomic.Int32
	NotYet      atomic.Int32 // answer this many exchanges 409 not_yet first
	Untagged    atomic.Int32 // answer this many tag reads 404 first
	Down        atomic.Bool  // the sizer answers 503
	Nonces      chan string
}

const fakeAdmin = "0123456789abcdef0123456789abcdef0123456789abcdef"

func newIdentityFakes(t *testing.T, instance, node string) *identityFakes {
	t.Helper()
	f := &identityFakes{Nonces: make(chan string, 16)}
	doc := fmt.Sprintf(`{"accountId":"123456789012","availabilityZone":"us-east-1a","instanceId":%q,"instanceType":"g5.xlarge","region":"us-east-1"}`, instance)
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
			io.WriteString(w, "TOK")
			return
		}
		if r.Header.Get("X-Aws-Ec2-Metadata-Token") != "TOK" {
			http.Error(w, "", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/latest/dynamic/instance-identity/document":
			io.WriteString(w, doc)
		case "/latest/dynamic/instance-identity/rsa2048":
			io.WriteString(w, "MIIBsignature")
		case "/latest/meta-data/tags/instance/burst:node":
			if f.Untagged.Add(-1) >= 0 {
				http.NotFound(w, r) // a fleet instance before CreateTags
				return
			}
			io.WriteString(w, node)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(imds.Close)
	ca := configtest.WriteCA(t, filepath.Join(t.TempDir(), "ca.pem"))
	sizer := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rq sizerapi.CredentialRequest
		if r.URL.Path != sizerapi.PathNodeCredential || r.Header.Get("Authorization") != "" || json.NewDecoder(r.Body).Decode(&rq) != nil ||
			rq.Document != doc || rq.Signature != "MIIBsignature" {
			http.Error(w, `{"code":"bad_request","message":"bad exchange"}`, 400)
			return
		}
		f.Exchanges.Add(1)
		if f.Down.Load() {
			http.Error(w, "sizer restarting", http.StatusServiceUnavailable)
			return
		}
		f.Nonces <- rq.Nonce
		if f.NotYet.Add(-1) >= 0 {
			w.WriteHeader(409)
			io.WriteString(w, `{"code":"not_yet","message":"no burst:node tag yet"}`)
			return
		}
		exp := time.Now().Add(time.Hour).Truncate(time.Second)
		tok, _ := auth.IssueNode(fakeAdmin, auth.NodeClaims{InstanceID: instance, Node: node, Expires: exp})
		json.NewEncoder(w).Encode(sizerapi.CredentialResponse{Credential: tok, Node: node, InstanceID: instance, Expires: exp})
	}))
	sizer.TLS = ca.ServerConfig(t)
	sizer.StartTLS()
	t.Cleanup(sizer.Close)
	f.IMDS, f.Sizer, f.CA = imds.URL, sizer.URL, ca.PEM
	return f
}

// scratchNft returns an nft wrapper that works inside a network namespace
// of its own (removed when the test ends), so the bootstrap's IMDS
// firewall never touches the host's. It skips without root or nft.
func scratchNft(t *testing.T) (nft, netns string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: the IMDS firewall needs root")
	}
	if _, err := os.Stat("/usr/sbin/nft"); err != nil {
		t.Skip("SKIPPING: /usr/sbin/nft missing (apt-get install nftables; scripts/install-deps.sh does)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	netns = "bstfw" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", netns).Run() })
	// a process holds the namespace, and the wrapper enters it by that
	// process's /proc entry: it then works from a Debian root's mount
	// namespace too (the bootstrap runs inside the root for 24.11+), where
	// the host's /run/netns is not visible
	holder := exec.Command("ip", "netns", "exec", netns, "sleep", "infinity")
	if err := holder.Start(); err != nil {
		t.Fatalf("holding netns %s: %v", netns, err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	self, _ := os.Readlink("/proc/self/ns/net")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid)); err == nil && ns != self {
			break // the holder is in the scratch namespace (never run nft in the host's)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder of netns %s never entered it", netns)
		}
	}
	nft = filepath.Join(t.TempDir(), "nft")
	os.WriteFile(nft, []byte(fmt.Sprintf("#!/bin/sh\nexec /usr/bin/nsenter --net=/proc/%d/ns/net /usr/sbin/nft \"$@\"\n", holder.Process.Pid)), 0o755)
	return nft, netns
}
