package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/version"
)

// TestPeerVersions: a caller of another burst version is counted (metric),
// listed on /v1/fleet with the sizer's own version, and /healthz says the
// sizer's version; a caller of the same version is not counted.
func TestPeerVersions(t *testing.T) {
	f := start(t, nil)
	hc := f.httpClient(t)
	get := func(path, ver string) []byte {
		t.Helper()
		req, _ := http.NewRequest("GET", f.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+f.token)
		if ver != "" {
			req.Header.Set(sizerapi.HeaderVersion, ver)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	if got := string(get("/healthz", "")); got != "ok "+version.Version+"\n" {
		t.Errorf("/healthz = %q, want the sizer's version", got)
	}
	get(sizerapi.PathBudgets, "v0.0.1-old")
	get(sizerapi.PathBudgets, "v0.0.1-old")
	get(sizerapi.PathBudgets, version.Version) // the same version: not a mismatch
	var fv sizerapi.FleetView
	if err := json.Unmarshal(get(sizerapi.PathFleet, ""), &fv); err != nil {
		t.Fatal(err)
	}
	if fv.SizerVersion != version.Version {
		t.Errorf("fleet sizer_version = %q, want %q", fv.SizerVersion, version.Version)
	}
	if len(fv.PeerVersions) != 1 || fv.PeerVersions[0].Version != "v0.0.1-old" || fv.PeerVersions[0].Peer != "admin" || fv.PeerVersions[0].Requests != 2 {
		t.Errorf("fleet peer_versions = %+v, want one admin caller of v0.0.1-old with 2 requests", fv.PeerVersions)
	}
	m := f.metrics(t)
	want := `burst_sizer_peer_version_mismatch_total{peer="admin",peer_version="v0.0.1-old",sizer_version="` + version.Version + `"} 2`
	if !strings.Contains(m, want) {
		t.Errorf("metrics lack %s", want)
	}
	// a flood of made-up versions stays bounded
	for i := 0; i < 3*maxPeerVersions; i++ {
		get(sizerapi.PathBudgets, "junk-"+strings.Repeat("x", i))
	}
	if n := len(f.srv.peers.list()); n > maxPeerVersions+1 {
		t.Errorf("%d peer versions kept, want at most %d", n, maxPeerVersions+1)
	}
}
