package server

import (
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// listenLoopback listens on addr, which must be a loopback address: the
// plain-HTTP metrics listener never faces the network.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("sizer.metrics_listen %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("sizer.metrics_listen %q: plain-HTTP metrics listen on loopback only (127.0.0.1 or ::1); scrape the HTTPS listener with the read-only token otherwise", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (sizer.metrics_listen): %w", addr, err)
	}
	return ln, nil
}

// metricsOnly serves GET /metrics and nothing else.
func (s *Server) metricsOnly() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return mux
}

// slogErrorLog sends net/http's own messages (TLS handshake errors, plain
// HTTP on the HTTPS port) to the structured log at debug level.
func slogErrorLog(l *slog.Logger) *log.Logger {
	return log.New(writerFunc(func(p []byte) (int, error) {
		l.Debug("http server", "msg", strings.TrimSpace(string(p)))
		return len(p), nil
	}), "", 0)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
