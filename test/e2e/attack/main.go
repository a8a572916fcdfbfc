// Command attack is what TestSecurity (test/e2e) runs inside a Slurm job of
// an unprivileged user on a burst node: it tries each attack a job user
// could make and writes one result per attempt. An attempt "succeeded"
// when it got what an attacker wants (a metadata token, a file's bytes, a
// 2xx from the sizer, a directory under the checkpoint root); the test
// wants every one to have failed. With -as-root-probe it only asks IMDS
// for a token (the test runs it as root in the node's namespace to show
// that the firewall is by user, not a broken network).
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Params are the attack's targets, written by the test.
type Params struct {
	IMDS        []string `json:"imds"`         // metadata endpoints to try
	SizerURL    string   `json:"sizer_url"`    // https
	CAFile      string   `json:"ca_file"`      // the sizer's CA (public)
	Files       []string `json:"files"`        // secrets to read
	Instance    string   `json:"instance"`     // this node's instance
	Node        string   `json:"node"`         // this node
	VictimJob   uint32   `json:"victim_job"`   // another user's job
	CkptRoot    string   `json:"ckpt_root"`    // the checkpoint root
	FutureJobs  []string `json:"future_jobs"`  // ids the attacker would pre-create
	SymlinkInto string   `json:"symlink_into"` // the attacker's own directory
	RouteFile   string   `json:"route_file"`   // the world-readable route credential
	Poweroff    []string `json:"poweroff"`     // poweroff stand-ins (own node, another's)
}

// Result is one attempt.
type Result struct {
	Attack    string `json:"attack"`
	Succeeded bool   `json:"succeeded"`
	Detail    string `json:"detail"`
}

func main() {
	params := flag.String("params", "", "params JSON")
	out := flag.String("out", "", "results JSON")
	probe := flag.String("as-root-probe", "", "only ask this IMDS endpoint for a token")
	wait := flag.Duration("wait", 2*time.Minute, "how long to wait for the params file")
	flag.Parse()
	if *probe != "" {
		ok, detail := imdsToken(*probe)
		fmt.Println(detail)
		if !ok {
			os.Exit(1)
		}
		return
	}
	var p Params
	for deadline := time.Now().Add(*wait); ; {
		b, err := os.ReadFile(*params)
		if err == nil && json.Unmarshal(b, &p) == nil && p.SizerURL != "" {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "attack: no params")
			os.Exit(2)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var res []Result
	add := func(name string, ok bool, detail string) {
		res = append(res, Result{Attack: name, Succeeded: ok, Detail: detail})
	}
	for _, u := range p.IMDS {
		ok, d := imdsToken(u)
		add("IMDS token (role credentials, user data, identity document) from "+u, ok, d)
	}
	for _, f := range p.Files {
		b, err := os.ReadFile(f)
		add("read "+f, err == nil, errString(err, len(b)))
	}
	c := sizerClient(p.CAFile)
	future := `{"action":"terminate","time":"2100-01-01T00:00:00Z","instance_id":"` + p.Instance + `","node":"` + p.Node + `","instance_type":"p5.48xlarge","zone":"us-east-1a"}`
	samples := fmt.Sprintf(`{"node":%q,"records":[{"seq":1,"time":%q,"kind":"gpu","gpus":[{"index":0,"util_percent":1,"memory_used_bytes":1,"memory_total_bytes":25769803776,"job_ids":[%d]}]}]}`,
		p.Node, time.Now().UTC().Format(time.RFC3339), p.VictimJob)
	forged := "bn2:" + p.Instance + ":" + p.Node + ":4102444800:" + strings.Repeat("0", 64)
	for _, a := range []struct{ name, path, body, tok string }{
		{"forged interruption dated 2100, no credential", "/v1/interruptions", future, ""},
		{"forged interruption dated 2100, forged node credential", "/v1/interruptions", future, forged},
		{"low-use samples for another user's job, forged node credential", "/v1/reports", samples, forged},
		{"another user's samples with the route credential", "/v1/reports", samples, routeCredential(p.RouteFile)},
	} {
		ok, d := post(c, p.SizerURL+a.path, a.body, a.tok)
		add(a.name, ok, d)
	}
	plain := strings.Replace(p.SizerURL, "https://", "http://", 1)
	ok, d := post(&http.Client{Timeout: 5 * time.Second}, plain+"/v1/interruptions", future, forged)
	add("forged interruption over plain HTTP", ok, d)
	for _, u := range p.Poweroff {
		ok, d := post(&http.Client{Timeout: 5 * time.Second}, u, "", "")
		add("power a node off as a user: "+u, ok, d)
	}
	for _, id := range p.FutureJobs {
		dir := filepath.Join(p.CkptRoot, id)
		err := os.Mkdir(dir, 0o777)
		add("pre-create checkpoint directory "+dir, err == nil, errString(err, 0))
		err = os.Symlink(p.SymlinkInto, dir+"-link")
		add("symlink in the checkpoint root "+dir+"-link", err == nil, errString(err, 0))
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(*out+".tmp", b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Rename(*out+".tmp", *out)
}

func errString(err error, n int) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("ok (%d bytes)", n)
}

// imdsToken asks for an IMDSv2 token, then user data and role credentials.
func imdsToken(base string) (bool, string) {
	hc := &http.Client{Timeout: 3 * time.Second}
	req, _ := http.NewRequest(http.MethodPut, base+"/latest/api/token", nil)
	req.Header.Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "60")
	resp, err := hc.Do(req)
	if err != nil {
		return false, err.Error()
	}
	tok, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return false, fmt.Sprintf("token: %s", resp.Status)
	}
	var got []string
	for _, p := range []string{"/latest/user-data", "/latest/meta-data/iam/security-credentials/", "/latest/dynamic/instance-identity/rsa2048"} {
		req, _ := http.NewRequest(http.MethodGet, base+p, nil)
		req.Header.Set("X-Aws-Ec2-Metadata-Token", string(tok))
		if r, err := hc.Do(req); err == nil {
			got = append(got, p+" "+r.Status)
			r.Body.Close()
		}
	}
	return true, "got a token; " + strings.Join(got, ", ")
}

func sizerClient(caFile string) *http.Client {
	pool := x509.NewCertPool()
	if b, err := os.ReadFile(caFile); err == nil {
		pool.AppendCertsFromPEM(b)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// routeCredential is the world-readable submit-time credential.
func routeCredential(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func post(c *http.Client, url, body, tok string) (bool, string) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	return resp.StatusCode/100 == 2, resp.Status + ": " + strings.TrimSpace(string(b))
}
