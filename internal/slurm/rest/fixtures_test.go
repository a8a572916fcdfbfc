package rest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/rest/v0038"
	"github.com/burst-hpc/burst/internal/slurm/rest/v0042"
	"github.com/burst-hpc/burst/internal/slurm/rest/v0045"
)

// The fixtures are what each release's slurmrestd answered
// (../testdata/<release>/rest-*, written by TestCaptureSamples with
// -update; rest-status.txt holds each answer's HTTP status).

func fixture(t *testing.T, rel, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", rel, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureAnswer is a captured answer as call() would have received it.
func fixtureAnswer(t *testing.T, rel, name string) *answer {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(fixture(t, rel, "rest-status.txt")))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == name {
			st, _ := strconv.Atoi(f[1])
			path, _, _ := strings.Cut(f[3], "?")
			return &answer{method: f[2], path: path, status: st, body: fixture(t, rel, name)}
		}
	}
	t.Fatalf("%s: no status for %s", rel, name)
	return nil
}

// TestGeneratedTypesDecodeRealAnswers: with the overlays, every captured
// answer decodes into the generated types of its data version (22.05's
// meta version numbers would not, as the spec declares them), to the same
// jobs and nodes as the shared decoders.
func TestGeneratedTypesDecodeRealAnswers(t *testing.T) {
	ids := func(t *testing.T, rel string) []int64 {
		jobs, err := slurm.ParseJobsJSON(fixture(t, rel, "rest-jobs.json"))
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, j := range jobs {
			out = append(out, int64(j.ID))
		}
		return out
	}
	strict := func(t *testing.T, b []byte, v any) {
		t.Helper()
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("decoding into %T: %v", v, err)
		}
	}
	t.Run("22.05", func(t *testing.T) {
		var p v0038.V0038Pings
		strict(t, fixture(t, "22.05", "rest-ping.json"), &p)
		if v := p.Meta.Slurm.Version; v == nil || *v.Major != 22 || *v.Minor != 5 {
			t.Errorf("meta version %+v", v)
		}
		var j v0038.V0038JobsResponse
		strict(t, fixture(t, "22.05", "rest-jobs.json"), &j)
		var got []int64
		for _, x := range *j.Jobs {
			got = append(got, int64(*x.JobId))
		}
		if want := ids(t, "22.05"); !equal(got, want) {
			t.Errorf("job ids %v, shared decoder %v", got, want)
		}
		var n v0038.V0038NodesResponse
		strict(t, fixture(t, "22.05", "rest-nodes.json"), &n)
		if len(*n.Nodes) != 7 {
			t.Errorf("%d nodes", len(*n.Nodes))
		}
	})
	t.Run("24.11", func(t *testing.T) {
		var p v0042.V0042OpenapiPingArrayResp
		strict(t, fixture(t, "24.11", "rest-ping.json"), &p)
		var j v0042.V0042OpenapiJobInfoResp
		strict(t, fixture(t, "24.11", "rest-jobs.json"), &j)
		var got []int64
		for _, x := range j.Jobs {
			got = append(got, *x.JobId)
		}
		if want := ids(t, "24.11"); !equal(got, want) {
			t.Errorf("job ids %v, shared decoder %v", got, want)
		}
		var n v0042.V0042OpenapiNodesResp
		strict(t, fixture(t, "24.11", "rest-nodes.json"), &n)
		if len(n.Nodes) != 7 {
			t.Errorf("%d nodes", len(n.Nodes))
		}
	})
	t.Run("26.05", func(t *testing.T) {
		var p v0045.V0045OpenapiPingArrayResp
		strict(t, fixture(t, "26.05", "rest-ping.json"), &p)
		var j v0045.V0045OpenapiJobInfoResp
		strict(t, fixture(t, "26.05", "rest-jobs.json"), &j)
		var got []int64
		for _, x := range j.Jobs {
			got = append(got, *x.JobId)
		}
		if want := ids(t, "26.05"); !equal(got, want) {
			t.Errorf("job ids %v, shared decoder %v", got, want)
		}
		var n v0045.V0045OpenapiNodesResp
		strict(t, fixture(t, "26.05", "rest-nodes.json"), &n)
		if len(n.Nodes) != 7 {
			t.Errorf("%d nodes", len(n.Nodes))
		}
	})
	// the int64 overlay: a federated job ID (2^31 and more) decodes
	var u v0042.V0042Uint32NoValStruct
	if err := json.Unmarshal([]byte(`{"set":true,"number":4294967294}`), &u); err != nil || *u.Number != 4294967294 {
		t.Errorf("uint32 beyond 2^31: %v", err)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAPIErrorsOfRealAnswers: slurmrestd's refusals become APIErrors with
// the endpoint and Slurm's words, classified as the command line's errors.
func TestAPIErrorsOfRealAnswers(t *testing.T) {
	type want struct {
		file string
		is   error  // nil: only an APIError
		text string // in the message
	}
	cases := map[string][]want{
		"22.05": {
			{"rest-job-unknown.json", slurm.ErrNotFound, "GET /slurm/v0.0.38/job/999999: HTTP 500"},
			{"rest-node-unknown.json", slurm.ErrNotFound, "Invalid node name specified (error 2018)"},
			{"rest-signal-unknown.json", slurm.ErrNotFound, "DELETE /slurm/v0.0.38/job/999999"},
			// 22.05 answers a token of another key as if the job were unknown
			{"rest-bad-token.json", nil, "Unable to find JobId=6"},
		},
		"24.11": {
			{"rest-job-unknown.json", slurm.ErrNotFound, "HTTP 404 Not Found: Invalid job id specified: Unable to query JobId=999999 (error 2017) [_handle_job_get]"},
			{"rest-signal-unknown.json", slurm.ErrNotFound, "Invalid job id specified (error 2017) [job 999999]"},
			{"rest-bad-token.json", slurm.ErrAuth, "Protocol authentication error"},
			{"rest-update-unknown-node.json", slurm.ErrNotFound, "POST /slurm/v0.0.42/node/nope-1: HTTP 500"},
			{"rest-update-unknown-field.json", nil, "[field bogus] (warning)"},
		},
		"26.05": {
			{"rest-job-unknown.json", slurm.ErrNotFound, "GET /slurm/v0.0.45/job/999999: HTTP 404"},
			{"rest-signal-unknown.json", slurm.ErrNotFound, "Invalid job id specified"},
			{"rest-bad-token.json", slurm.ErrAuth, "HTTP 511"},
			{"rest-update-unknown-node.json", slurm.ErrNotFound, "HTTP 422"},
			{"rest-update-unknown-field.json", nil, `Ignoring unknown field "bogus"`},
		},
	}
	for rel, ws := range cases {
		for _, w := range ws {
			err := fixtureAnswer(t, rel, w.file).check()
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Errorf("%s %s: %v, want an APIError", rel, w.file, err)
				continue
			}
			if w.is != nil && !errors.Is(err, w.is) {
				t.Errorf("%s %s: %v, want %v", rel, w.file, err, w.is)
			}
			for _, e := range []error{slurm.ErrNotFound, slurm.ErrAuth, slurm.ErrAccessDenied, slurm.ErrUnsupported} {
				if e != w.is && errors.Is(err, e) {
					t.Errorf("%s %s: %v is also %v", rel, w.file, err, e)
				}
			}
			if !strings.Contains(err.Error(), w.text) {
				t.Errorf("%s %s: %q does not say %q", rel, w.file, err, w.text)
			}
		}
		// 23.02+ answers an unknown node with 200 and an error numbered 0
		if rel != "22.05" {
			if err := fixtureAnswer(t, rel, "rest-node-unknown.json").check(); !unknownNode(err) {
				t.Errorf("%s: GET node/nope-1 not taken for an unknown node: %v", rel, err)
			}
		}
		for _, ok := range []string{"rest-ping.json", "rest-job.json", "rest-nodes.json"} {
			if err := fixtureAnswer(t, rel, ok).check(); err != nil {
				t.Errorf("%s %s: %v", rel, ok, err)
			}
		}
	}
	// slurmrestd's plain-text refusals
	for _, c := range []struct {
		status int
		body   string
		is     error
	}{
		{401, "Authentication failure", slurm.ErrAuth},
		{404, "Unable to find requested URL", slurm.ErrUnsupported},
		{405, "Unsupported method", slurm.ErrUnsupported},
		{403, "", slurm.ErrAccessDenied},
	} {
		err := (&answer{method: "GET", path: "/slurm/v0.0.42/ping/", status: c.status, body: []byte(c.body)}).check()
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), "GET /slurm/v0.0.42/ping/") {
			t.Errorf("HTTP %d %q: %v, want %v naming the endpoint", c.status, c.body, err, c.is)
		}
	}
}

func FuzzProblems(f *testing.F) {
	f.Add([]byte(`{"errors":[{"error":"x","errno":2018}],"warnings":[{"description":"Ignoring unknown field \"a\"","source":"#/a/"}]}`))
	f.Add([]byte(`{"status":[{"error":{"code":2017,"string":"Invalid job id specified"},"step_id":"9"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		errs, ignored, ok := problems(b)
		if !ok && (len(errs) > 0 || len(ignored) > 0) {
			t.Fatal("problems from an answer that is not JSON")
		}
		e := &APIError{Method: "GET", Endpoint: "/x", Status: 200, Problems: errs}
		_ = e.Error()
		_ = e.Unwrap()
	})
}
