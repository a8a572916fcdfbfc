package server

import (
	"net/http"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/version"
)

// versionRE is what a version header may hold (git describe's output).
var versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)

// maxPeerVersions bounds how many distinct other versions are kept (a
// caller could send any header); further ones count under "other".
const maxPeerVersions = 16

// peerVersions are the callers seen with another burst version than the
// sizer's own: node agents, the Slurm hooks and the CLI send theirs in
// sizerapi.HeaderVersion.
type peerVersions struct {
	mu     sync.Mutex
	m      map[string]*sizerapi.PeerVersion // by version + "\x00" + kind
	metric *prometheus.CounterVec
}

func newPeerVersions() *peerVersions {
	return &peerVersions{m: map[string]*sizerapi.PeerVersion{},
		metric: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_peer_version_mismatch_total",
			Help: "Requests from a node agent, Slurm hook or CLI of another burst version than the sizer's (sizer_version label: the sizer's own)."},
			[]string{"peer_version", "peer", "sizer_version"})}
}

// peerKind is the kind of caller without its instance-specific part.
func peerKind(p auth.Principal) string {
	switch {
	case p.Node != "":
		return "node"
	case p.Account != "":
		return "account"
	}
	return p.Kind()
}

// note records r's version when it differs from the sizer's; it reports
// whether this version and kind are new (then the caller logs it once).
func (pv *peerVersions) note(r *http.Request, p auth.Principal, now time.Time) (sizerapi.PeerVersion, bool) {
	v := r.Header.Get(sizerapi.HeaderVersion)
	if version.Same(v, version.Version) {
		return sizerapi.PeerVersion{}, false
	}
	if !versionRE.MatchString(v) { // a caller's header: kept short and plain
		v = "invalid"
	}
	kind := peerKind(p)
	pv.mu.Lock()
	defer pv.mu.Unlock()
	key := v + "\x00" + kind
	e, ok := pv.m[key]
	if !ok && len(pv.m) >= maxPeerVersions {
		v, key = "other", "other\x00"+kind
		e, ok = pv.m[key]
	}
	if !ok {
		e = &sizerapi.PeerVersion{Version: v, Peer: kind, FirstSeen: now}
		pv.m[key] = e
	}
	e.LastSeen, e.Requests = now, e.Requests+1
	if p.Node != "" {
		e.LastNode = p.Node
	}
	pv.metric.WithLabelValues(v, kind, version.Version).Inc()
	return *e, !ok
}

// list is every mismatch seen, most recent first.
func (pv *peerVersions) list() []sizerapi.PeerVersion {
	pv.mu.Lock()
	defer pv.mu.Unlock()
	out := make([]sizerapi.PeerVersion, 0, len(pv.m))
	for _, e := range pv.m {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastSeen.After(out[j].LastSeen) })
	return out
}

// notePeer is serveAPI's hook: count and, the first time, log a caller of
// another version.
func (s *Server) notePeer(r *http.Request, p auth.Principal) {
	if e, first := s.peers.note(r, p, s.now()); first {
		s.log.Warn("a caller runs another burst version than this sizer; upgrade it (or the sizer) so both match",
			"peer", e.Peer, "peer_version", e.Version, "sizer_version", version.Version, "node", e.LastNode, "path", r.URL.Path)
	}
}
