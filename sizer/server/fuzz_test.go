package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// fuzzBody posts arbitrary bodies to one endpoint as tok: the server never
// fails (5xx other than 503 unverifiable), and a refused request changes
// nothing in the store.
func fuzzBody(f *testing.F, path, who string, seeds ...any) {
	fx := start(f, map[string]float64{"phys": 100})
	cred, _ := fx.node(f, "gpu-1", "g6.xlarge", "us-east-1a", true)
	fx.runs(7, "gpu-1")
	tok := map[string]string{"admin": fx.token, "node": cred, "none": ""}[who]
	for _, s := range seeds {
		b, _ := json.Marshal(s)
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"records":[{"seq":1,"kind":"gpu","time":"2100-01-01T00:00:00Z","gpus":[{"index":0,"job_ids":[4294967295]}]}]}`))
	f.Add([]byte(`[]`))
	h := fx.srv.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		before := fx.dump(t)
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.RemoteAddr = "127.0.0.1:1"
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 && w.Code != 503 {
			t.Fatalf("POST %s %q: %d %s", path, body, w.Code, w.Body)
		}
		if w.Code != 200 && !reflect.DeepEqual(before, fx.dump(t)) {
			t.Fatalf("refused POST %s %q (%d) changed the store", path, body, w.Code)
		}
		if w.Code == 200 && strings.Contains(path, "interruptions") {
			ins, _ := fx.srv.Store().Interruptions(req.Context(), time.Time{})
			for _, in := range ins {
				if in.Time.After(fx.clk.Now().Add(fx.srv.o.ClockSkew)) {
					t.Fatalf("interruption stored in the future: %+v", in)
				}
			}
		}
	})
}

func FuzzNodeCredentialBody(f *testing.F) {
	fuzzBody(f, sizerapi.PathNodeCredential, "none", sizerapi.CredentialRequest{Document: "{}", Signature: "MIIB", Nonce: testNonce})
}
func FuzzRenewBody(f *testing.F) { fuzzBody(f, sizerapi.PathNodeRenew, "node", struct{}{}) }
func FuzzReportsBody(f *testing.F) {
	fuzzBody(f, sizerapi.PathReports, "node", gpuBatch("gpu-1", 1, 2, 7, time.Now()))
}
func FuzzInterruptionBody(f *testing.F) {
	fuzzBody(f, sizerapi.PathInterruptions, "node", sizerapi.Interruption{Action: "terminate", Time: time.Now()})
}
func FuzzRankBody(f *testing.F) {
	fuzzBody(f, sizerapi.PathRank, "admin", sizerapi.RankRequest{Class: "l4-1x", Job: sizerapi.JobRequest{Account: "phys", Comment: "burst: params=7B"}})
}
func FuzzRouteBody(f *testing.F) {
	fuzzBody(f, sizerapi.PathRoute, "admin", sizerapi.RouteRequest{Job: sizerapi.JobRequest{GPUsPerNode: 2, Comment: "burst: params=70B deadline=8h"}})
}
func FuzzLaunchBody(f *testing.F) {
	fuzzBody(f, sizerapi.PathInstanceLaunch, "admin", sizerapi.InstanceEvent{InstanceID: "i-1", InstanceType: "g5.xlarge", Capacity: "spot", Job: &sizerapi.Job{JobID: "1", Account: "phys"}})
}
func FuzzTerminateBody(f *testing.F) {
	fuzzBody(f, sizerapi.PathInstanceTerminate, "admin", sizerapi.InstanceEvent{InstanceID: "i-1"})
}
func FuzzBootsBody(f *testing.F) {
	fuzzBody(f, sizerapi.PathBoots, "node", sizerapi.BootReport{OK: true, Phases: []sizerapi.BootPhase{{Name: "mount", Seconds: 1}}})
}
