package bootstrap

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/userdata"
)

func TestIMDSUserData(t *testing.T) {
	doc, err := userdata.Encode(testUD())
	if err != nil {
		t.Fatal(err)
	}
	var puts, gets int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			if r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") == "" {
				http.Error(w, "no ttl", 400)
				return
			}
			puts++
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
			io.WriteString(w, "TOKEN123")
		case r.Method == http.MethodGet && r.URL.Path == "/latest/user-data":
			if r.Header.Get("X-Aws-Ec2-Metadata-Token") != "TOKEN123" {
				http.Error(w, "IMDSv2 token required", http.StatusUnauthorized)
				return
			}
			gets++
			w.Write(doc)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	got, err := fetchIMDSUserData(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(doc) || puts != 1 || gets != 1 {
		t.Fatalf("puts=%d gets=%d got %q", puts, gets, got)
	}
	if _, err := userdata.Decode(got); err != nil {
		t.Fatal(err)
	}

	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
			io.WriteString(w, "T")
			return
		}
		http.NotFound(w, r)
	}))
	defer empty.Close()
	_, err = fetchIMDSUserData(context.Background(), empty.URL)
	if err == nil || !strings.Contains(err.Error(), "no user data") {
		t.Fatalf("want no-user-data error, got %v", err)
	}
}
