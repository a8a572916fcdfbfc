package ec2emu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
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
	if s.opts.IMDSHostFor != nil {
		host = s.opts.IMDSHostFor(in.snapshot())
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("starting metadata endpoint for %s: %w", in.ID, err)
	}
	m := &imdsServer{srv: s, id: in.ID, ln: ln, tokens: map[string]time.Time{}, done: make(chan struct{})}
	hops := in.MetadataOptions.HTTPPutResponseHopLimit
	m.http = &http.Server{Handler: m, ReadHeaderTimeout: 5 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if err := setHopLimit(c, hops); err != nil {
				s.log.Warn("setting the metadata hop limit", "instance", in.ID, "err", err)
			}
			return ctx
		}}
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

// forgetTokens drops every session token (the instance stopped).
func (m *imdsServer) forgetTokens() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.tokens)
}

const (
	hdrTTL   = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
	hdrToken = "X-Aws-Ec2-Metadata-Token"
)

func (m *imdsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := m.srv
	now := s.Now()
	s.mu.Lock()
	in := s.instances[m.id]
	var opts MetadataOptions
	if in != nil {
		opts = in.MetadataOptions
	}
	s.mu.Unlock()
	if in == nil || opts.HTTPEndpoint == "disabled" {
		http.Error(w, "403 - Forbidden", http.StatusForbidden)
		return
	}
	if s.opts.IMDSFromInstanceOnly {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		s.mu.Lock()
		ip := in.PrivateIP
		s.mu.Unlock()
		if host != ip {
			http.Error(w, "403 - Forbidden (not from the instance)", http.StatusForbidden)
			return
		}
	}
	if r.URL.Path == "/latest/api/token" {
		if r.Method != http.MethodPut {
			http.Error(w, "", http.StatusMethodNotAllowed)
			return
		}
		if r.Header.Get("X-Forwarded-For") != "" { // IMDS refuses token requests that went through a proxy
			http.Error(w, "403 - Forbidden", http.StatusForbidden)
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
	// IMDSv2: a token, when sent, must be valid; without one the request is
	// IMDSv1, which HttpTokens=required refuses.
	if tok := r.Header.Get(hdrToken); tok != "" || opts.HTTPTokens != "optional" {
		m.mu.Lock()
		exp, ok := m.tokens[tok]
		m.mu.Unlock()
		if !ok || now.After(exp) {
			http.Error(w, "", http.StatusUnauthorized)
			return
		}
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

// imdsTagKey is what EC2 allows in instance metadata tag keys; tags with
// other keys are left out of tags/instance.
var imdsTagKey = regexp.MustCompile(`^[a-zA-Z0-9+\-=._:@]+$`)

func (m *imdsServer) lookup(p string) ([]byte, string, bool) {
	s := m.srv
	s.mu.Lock()
	in := s.instances[m.id]
	if in == nil {
		s.mu.Unlock()
		return nil, "", false
	}
	if kind, ok := strings.CutPrefix(p, "/latest/dynamic/instance-identity/"); ok && (kind == IdentitySignature || kind == IdentityRSA2048) {
		doc := s.identityDocument(in)
		s.mu.Unlock()
		sig, err := s.identitySignature(kind, doc)
		if err != nil {
			s.log.Error("signing the identity document", "instance", m.id, "err", err)
			return nil, "", false
		}
		return sig, "text/plain", true
	}
	defer s.mu.Unlock()
	text := func(v string) ([]byte, string, bool) { return []byte(v), "text/plain", true }
	switch p {
	case "/latest/user-data":
		if len(in.UserData) == 0 {
			return nil, "", false
		}
		return in.UserData, "application/octet-stream", true
	case "/latest/meta-data":
		return text("ami-id\nami-launch-index\nevents/\ninstance-id\ninstance-life-cycle\ninstance-type\nlocal-ipv4\nplacement/\nspot/\ntags/")
	case "/latest/meta-data/ami-id":
		return text(in.ImageID)
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
	case "/latest/dynamic/instance-identity":
		return text("document\nrsa2048\nsignature")
	case "/latest/dynamic/instance-identity/document":
		return s.identityDocument(in), "text/plain", true
	}
	if in.MetadataOptions.InstanceMetadataTags != "enabled" {
		return nil, "", false
	}
	if p == "/latest/meta-data/tags/instance" {
		keys := make([]string, 0, len(in.Tags))
		for k := range in.Tags {
			if imdsTagKey.MatchString(k) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		return text(strings.Join(keys, "\n"))
	}
	if k, ok := strings.CutPrefix(p, "/latest/meta-data/tags/instance/"); ok && imdsTagKey.MatchString(k) {
		v, ok := in.Tags[k]
		if !ok {
			return nil, "", false
		}
		return text(v)
	}
	return nil, "", false
}
