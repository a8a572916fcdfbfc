package bootstrap

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/userdata"
)

// fakeIMDS serves IMDSv2 with the given instance tags, launch index and user data.
func fakeIMDS(t *testing.T, tags map[string]string, index int, ud []byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
			io.WriteString(w, "tok")
			return
		}
		if r.Header.Get("X-Aws-Ec2-Metadata-Token") != "tok" {
			http.Error(w, "token", 401)
			return
		}
		p := r.URL.Path
		switch {
		case p == "/latest/user-data" && ud != nil:
			w.Write(ud)
		case p == "/latest/meta-data/ami-launch-index":
			io.WriteString(w, strconv.Itoa(index))
		case strings.HasPrefix(p, "/latest/meta-data/tags/instance/"):
			v, ok := tags[strings.TrimPrefix(p, "/latest/meta-data/tags/instance/")]
			if !ok {
				http.NotFound(w, r)
				return
			}
			io.WriteString(w, v)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestNodeFromIMDS(t *testing.T) {
	ctx := context.Background()
	url := fakeIMDS(t, map[string]string{"burst:nodes": "gpu-1,gpu-2", "burst:nodes.2": "gpu-3"}, 2, nil)
	if n, err := nodeFromIMDS(ctx, url); err != nil || n != "gpu-3" {
		t.Fatalf("fleet: %q %v", n, err)
	}
	url = fakeIMDS(t, map[string]string{"burst:node": "gpu-9"}, 0, nil)
	if n, err := nodeFromIMDS(ctx, url); err != nil || n != "gpu-9" {
		t.Fatalf("single: %q %v", n, err)
	}
	url = fakeIMDS(t, map[string]string{}, 0, nil) // tags not enabled in metadata
	if _, err := nodeFromIMDS(ctx, url); err == nil || !strings.Contains(err.Error(), "enable instance metadata tags") {
		t.Fatalf("no tags: %v", err)
	}
}

// A fleet document read from IMDS: the bootstrap picks its own entry by tags.
func TestRunFleetUserDataIdentity(t *testing.T) {
	dir := t.TempDir()
	u := testUD()
	u.NodeName, u.Agent.Credential = "", ""
	u.Nodes = []userdata.NodeEntry{{Name: "gpu-6", Credential: "tok_6666666666666666"}, {Name: "gpu-7", Credential: "tok_7777777777777777"}}
	// Never the host's munge paths in a unit test: a key source that does not
	// exist makes the run stop at the munge step, before it installs or starts anything.
	u.Slurm.ConfMode, u.Slurm.ConfPath = userdata.ConfFile, filepath.Join(dir, "slurm.conf")
	u.Munge = userdata.Munge{KeySource: "file://" + filepath.Join(dir, "no-such-key"), KeyPath: filepath.Join(dir, "k", "munge.key"),
		Socket: filepath.Join(dir, "munge.sock")}
	doc, err := userdata.Encode(u)
	if err != nil {
		t.Fatal(err)
	}
	// Fails at munge (the key file does not exist), after the identity is known.
	o := Options{Exec: ExecDirect, RunDir: filepath.Join(dir, "run"), Logger: quietLogger(),
		IMDSEndpoint: fakeIMDS(t, map[string]string{"burst:nodes": "gpu-6,gpu-7"}, 1, doc)}
	rep, err := RunReport(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "reading munge key") || rep.NodeName != "gpu-7" {
		t.Fatalf("want node gpu-7 then a munge failure; got node %q err %v", rep.NodeName, err)
	}
	// Options.NodeName overrides; a node the fleet does not list is refused.
	o.NodeName = "gpu-8"
	_, err = RunReport(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), `"gpu-8", which the user data's fleet (gpu-6,gpu-7) does not list`) {
		t.Fatalf("want refusal of gpu-8, got %v", err)
	}
}
