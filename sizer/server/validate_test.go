package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// TestRouteBodyValidated: negative or absurd numbers and wrong JSON types
// in POST /v1/route are 400 naming the field, in JSON's terms (no Go type
// names).
func TestRouteBodyValidated(t *testing.T) {
	f := start(t, nil)
	hc := f.httpClient(t)
	for _, c := range []struct{ body, want string }{
		{`{"job":{"gpus_per_node":-1}}`, "job.gpus_per_node: -1 is out of range"},
		{`{"job":{"gpus_per_node":1,"nodes":1000000}}`, "job.nodes: 1e+06 is out of range"},
		{`{"job":{"gpus_per_node":1,"time_limit_seconds":-5}}`, "job.time_limit_seconds"},
		{`{"job":{"gpus_per_node":1,"memory_mib_per_node":-2}}`, "job.memory_mib_per_node"},
		{`{"job":{"gpus_per_node":"eight"}}`, "field job.gpus_per_node: want a whole number, got a JSON string"},
		{`{"job":{"gpus_per_node":1.5}}`, "field job.gpus_per_node: want a whole number"},
		{`{"job":{"colour":"red"}}`, `unknown field \"colour\"`}, // JSON-escaped in the answer
		{`{"job":`, "the JSON ends too early"},
	} {
		req, _ := http.NewRequest("POST", f.url+sizerapi.PathRoute, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+f.token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		msg := string(b)
		if resp.StatusCode != 400 || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %s; want 400 with %q", c.body, resp.StatusCode, msg, c.want)
		}
		for _, goName := range []string{"sizerapi.", "Go struct", "of type int", "*sizerapi"} {
			if strings.Contains(msg, goName) {
				t.Errorf("%s: the answer names Go types (%q): %s", c.body, goName, msg)
			}
		}
	}
}

// TestBadMetadataShowsTen: a comment with many bad pairs is refused with
// ten of them and a count of the rest.
func TestBadMetadataShowsTen(t *testing.T) {
	f := start(t, nil)
	comment := "burst:" + strings.Repeat(" nope", 40)
	d, err := Decide(t.Context(), f.srv.pol, nil, nil, nil, "", sizerapi.JobRequest{GPUsPerNode: 1, Comment: comment}, f.clk.Now(), 0)
	if err != nil || !d.Refused {
		t.Fatalf("bad metadata: %+v %v", d, err)
	}
	if n := strings.Count(d.RefuseMessage, "is not key=value"); n != 10 || !strings.Contains(d.RefuseMessage, "and 30 more problem(s)") {
		t.Errorf("%d problems shown, want 10 and a count: %s", n, d.RefuseMessage)
	}
}
