package sizerclient

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// With several sizers, a call the current one does not answer goes to the
// next, which then stays current; API errors are answers, not failures.
func TestFailsOverToTheSizerThatAnswers(t *testing.T) {
	var hits atomic.Int32
	live := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Query().Get("account") == "nope" {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(sizerapi.ErrorResponse{Code: sizerapi.CodeBadRequest, Message: "no such account"})
			return
		}
		json.NewEncoder(w).Encode(sizerapi.AccountSpend{Account: r.URL.Query().Get("account"), SpentUSD: 1.25})
	}))
	defer live.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a sizer that is down: nothing accepts
	if err != nil {
		t.Fatal(err)
	}
	dead := "https://" + ln.Addr().String()
	ln.Close()
	c, err := New(dead, "tok", WithCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: live.Certificate().Raw})), WithFallbackURLs(live.URL))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		sp, err := c.Spend(ctx, "nlp")
		if err != nil || sp.SpentUSD != 1.25 {
			t.Fatalf("call %d: %+v %v", i, sp, err)
		}
	}
	if c.cur.Load() != 1 {
		t.Errorf("the answering sizer is not current (index %d)", c.cur.Load())
	}
	if _, err := c.Spend(ctx, "nope"); err == nil || hits.Load() != 4 {
		t.Errorf("an API error: %v after %d hits, want it returned from the one sizer", err, hits.Load())
	}
	live.Close()
	if _, err := c.Spend(ctx, "nlp"); err == nil {
		t.Error("a call with every sizer down succeeded")
	}
	if _, err := New(dead, "tok", WithFallbackURLs("http://plain:1")); err == nil {
		t.Error("a plain-HTTP fallback URL was accepted")
	}
}
