package ec2emu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// imdsServer is one instance's metadata service.
type imdsServer struct {
	srv    *Server
	id     string
	ln     net.Listener
	http   *http.Server
	mu     sync.Mutex
	tokens map[string]time.Time // token -> expiry (emulated)
	done   chan struct{}
}

// startIMDS starts the instance's listener once; s.mu held.
func (s *Server) startIMDS(in *instance) (string, error) {
	if in.imds != nil {
		return in.IMDSURL, nil
	}
	if in.State == "terminated" {
		return "", fmt.Errorf("metadata endpoint for %s: instance is terminated", in.ID)
	}
	host := s.opts.IMDSHost
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("starting metadata endpoint for %s: %w", in.ID, err)
	}
	m := &imdsServer{srv: s, id: in.ID, ln: ln, tokens: map[string]time.Time{}, done: make(chan struct{})}
	m.http = &http.Server{Handler: m, ReadHeaderTimeout: 5 * time.Second}
	go func() { defer close(m.done); _ = m.http.Serve(ln) }()
	in.imds = m
	in.IMDSURL = "http://" + ln.Addr().String()
	return in.IMDSURL, nil
}

func (m *imdsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = m.http.Shutdown(ctx)
	<-m.done
}

const (
	hdrTTL   = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
	hdrToken = "X-Aws-Ec2-Metadata-Token"
)

func (m *imdsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := m.srv.Now()
	if r.URL.Path == "/latest/api/token" {
		if r.Method != http.MethodPut {
			http.Error(w, "", http.StatusMethodNotAllowed)
			return
		}
		ttl, err := strconv.Atoi(r.Header.Get(hdrTTL))
		if err != nil || ttl < 1 || ttl > 21600 {
			http.Error(w, "", http.StatusBadRequest)
			return
		}
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		tok := hex.EncodeToString(b)
		m.mu.Lock()
		m.tokens[tok] = now.Add(time.Duration(ttl) * time.Second)
		m.mu.Unlock()
		w.Header().Set(hdrTTL, strconv.Itoa(ttl))
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(tok))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "", http.StatusMethodNotAllowed)
		return
	}
	m.mu.Lock()
	exp, ok := m.tokens[r.Header.Get(hdrToken)]
	m.mu.Unlock()
	if !ok || now.After(exp) {
		http.Error(w, "", http.StatusUnauthorized) // IMDSv2 only
		return
	}
	body, ctype, found := m.lookup(strings.TrimSuffix(r.URL.Path, "/"))
	if !found {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<?xml version=\"1.0\" encoding=\"iso-8859-1\"?>\n<html><head><title>404 - Not Found</title></head><body><h1>404 - Not Found</h1></body></html>\n"))
		return
	}
	w.Header().Set("Content-Type", ctype)
	_, _ = w.Write(body)
}

func (m *imdsServer) lookup(p string) ([]byte, string, bool) {
	s := m.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[m.id]
	if in == nil {
		return nil, "", false
	}
	text := func(v string) ([]byte, string, bool) { return []byte(v), "text/plain", true }
	switch p {
	case "/latest/user-data":
		if len(in.UserData) == 0 {
			return nil, "", false
		}
		return in.UserData, "application/octet-stream", true
	case "/latest/meta-data":
		return text("ami-launch-index\nevents/\ninstance-id\ninstance-life-cycle\ninstance-type\nlocal-ipv4\nplacement/\nspot/\ntags/")
	case "/latest/meta-data/instance-id":
		return text(in.ID)
	case "/latest/meta-data/instance-type":
		return text(in.InstanceType)
	case "/latest/meta-data/local-ipv4":
		return text(in.PrivateIP)
	case "/latest/meta-data/ami-launch-index":
		return text(strconv.Itoa(in.LaunchIndex))
	case "/latest/meta-data/instance-life-cycle":
		return text(in.Lifecycle)
	case "/latest/meta-data/placement/availability-zone":
		return text(in.Zone)
	case "/latest/meta-data/placement/region":
		return text(s.opts.Region)
	case "/latest/meta-data/spot/instance-action":
		if in.notice == nil {
			return nil, "", false
		}
		b, _ := json.Marshal(map[string]string{"action": "terminate", "time": in.notice.Format("2006-01-02T15:04:05Z")})
		return b, "text/plain", true
	case "/latest/meta-data/spot/termination-time":
		if in.notice == nil {
			return nil, "", false
		}
		return text(in.notice.Format("2006-01-02T15:04:05Z"))
	case "/latest/meta-data/events/recommendations/rebalance":
		if in.rebalance == nil {
			return nil, "", false
		}
		b, _ := json.Marshal(map[string]string{"noticeTime": in.rebalance.Format("2006-01-02T15:04:05Z")})
		return b, "text/plain", true
	case "/latest/dynamic/instance-identity/document":
		b, _ := json.MarshalIndent(map[string]any{
			"instanceId": in.ID, "instanceType": in.InstanceType, "availabilityZone": in.Zone,
			"region": s.opts.Region, "privateIp": in.PrivateIP, "accountId": "123456789012",
			"pendingTime": in.LaunchTime.UTC().Format(time.RFC3339), "architecture": "x86_64",
			"imageId": in.ImageID, "version": "2017-09-30",
		}, "", "  ")
		return b, "text/plain", true
	}
	if !in.MetadataTags {
		return nil, "", false
	}
	if p == "/latest/meta-data/tags/instance" {
		keys := make([]string, 0, len(in.Tags))
		for k := range in.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return text(strings.Join(keys, "\n"))
	}
	if k, ok := strings.CutPrefix(p, "/latest/meta-data/tags/instance/"); ok {
		v, ok := in.Tags[k]
		if !ok {
			return nil, "", false
		}
		return text(v)
	}
	return nil, "", false
}
