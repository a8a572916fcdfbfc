package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The node's IMDS firewall: instance metadata (IPv4 169.254.169.254, IPv6
// fd00:ec2::254, and the endpoint the bootstrap was given, e.g. the EC2
// emulator's per-instance listener in the tests) answers only processes
// running as root. A job's processes (any other uid) get "connection
// refused": no instance-role credentials, no user data, no identity
// document. The image installs the same table from a unit ordered before
// slurmd and burst-bootstrap; the bootstrap installs it again (idempotent:
// the table is replaced whole, atomically) and verifies it before slurmd can
// start, and fails the boot when it cannot.

// FirewallTable is the nftables table (family inet) holding the rules.
const FirewallTable = "burst_imds"

// The EC2 instance metadata addresses.
var (
	IMDSv4 = netip.MustParseAddr("169.254.169.254")
	IMDSv6 = netip.MustParseAddr("fd00:ec2::254")
)

// Endpoint is one metadata address to close to non-root users: every port
// when Port is 0.
type Endpoint struct {
	Addr netip.Addr
	Port int
}

// FirewallEndpoints are the metadata endpoints to close: EC2's two
// addresses, all ports, and each given endpoint URL's address and port.
func FirewallEndpoints(endpoints ...string) ([]Endpoint, error) {
	out := []Endpoint{{Addr: IMDSv4}, {Addr: IMDSv6}}
	for _, e := range endpoints {
		if e == "" {
			continue
		}
		u, err := url.Parse(e)
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("IMDS endpoint %q is not a URL", e)
		}
		host := u.Hostname()
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(host); err == nil {
			addrs = []netip.Addr{a}
		} else {
			ips, err := net.LookupIP(host)
			if err != nil {
				return nil, fmt.Errorf("resolving IMDS endpoint %q: %w", e, err)
			}
			for _, ip := range ips {
				if a, ok := netip.AddrFromSlice(ip); ok {
					addrs = append(addrs, a.Unmap())
				}
			}
		}
		port := 80
		if p := u.Port(); p != "" {
			port, _ = strconv.Atoi(p)
		} else if u.Scheme == "https" {
			port = 443
		}
		for _, a := range addrs {
			if a == IMDSv4 || a == IMDSv6 {
				continue // closed on every port already
			}
			out = append(out, Endpoint{Addr: a.Unmap(), Port: port})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Addr != out[j].Addr {
			return out[i].Addr.Less(out[j].Addr)
		}
		return out[i].Port < out[j].Port
	})
	return dedupeEndpoints(out), nil
}

func dedupeEndpoints(in []Endpoint) []Endpoint {
	var out []Endpoint
	for i, e := range in {
		if i == 0 || e != in[i-1] {
			out = append(out, e)
		}
	}
	return out
}

// FirewallRules renders the nft script that replaces the table: it creates
// the table (so that the delete never fails), deletes it, and adds it anew
// with one rule per endpoint, in one atomic transaction.
func FirewallRules(eps []Endpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by burst: instance metadata for root only\n")
	fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\n", FirewallTable, FirewallTable)
	fmt.Fprintf(&b, "table inet %s {\n\tchain output {\n\t\ttype filter hook output priority 0; policy accept;\n", FirewallTable)
	for _, e := range eps {
		fam := "ip"
		if e.Addr.Is6() {
			fam = "ip6"
		}
		match := fmt.Sprintf("%s daddr %s", fam, e.Addr)
		if e.Port > 0 {
			match += fmt.Sprintf(" tcp dport %d", e.Port)
		}
		fmt.Fprintf(&b, "\t\t%s meta skuid != 0 counter reject\n", match)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// ParseFirewall reads `nft -j list table inet burst_imds` and returns the
// endpoints it closes to non-root users: rules that match a destination
// address (and maybe a TCP port), a socket uid other than 0, and reject.
func ParseFirewall(js []byte) ([]Endpoint, error) {
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("parsing nft -j output: %w", err)
	}
	var out []Endpoint
	hook := false
	for _, obj := range doc.Nftables {
		if raw, ok := obj["chain"]; ok {
			var c struct {
				Table, Name, Hook, Type, Policy string
			}
			if json.Unmarshal(raw, &c) == nil && c.Table == FirewallTable && c.Hook == "output" && c.Type == "filter" {
				hook = true
			}
			continue
		}
		raw, ok := obj["rule"]
		if !ok {
			continue
		}
		var r struct {
			Table string    `json:"table"`
			Chain string    `json:"chain"`
			Expr  []nftExpr `json:"expr"`
		}
		if err := json.Unmarshal(raw, &r); err != nil || r.Table != FirewallTable {
			continue
		}
		if ep, ok := rejectedEndpoint(r.Expr); ok {
			out = append(out, ep)
		}
	}
	if !hook {
		return nil, fmt.Errorf("table inet %s has no output filter chain", FirewallTable)
	}
	return out, nil
}

// nftExpr is one expression of an nft -j rule.
type nftExpr map[string]json.RawMessage

// rejectedEndpoint reads a rule's expressions: ok when it rejects every
// uid but 0 sending to an address (and port).
func rejectedEndpoint(exprs []nftExpr) (ep Endpoint, ok bool) {
	var uidNot0, reject bool
	for _, e := range exprs {
		if _, ok := e["reject"]; ok {
			reject = true
			continue
		}
		m, ok := e["match"]
		if !ok {
			continue
		}
		var mt struct {
			Op    string          `json:"op"`
			Left  json.RawMessage `json:"left"`
			Right json.RawMessage `json:"right"`
		}
		if json.Unmarshal(m, &mt) != nil {
			continue
		}
		var left struct {
			Meta    *struct{ Key string }             `json:"meta"`
			Payload *struct{ Protocol, Field string } `json:"payload"`
		}
		if json.Unmarshal(mt.Left, &left) != nil {
			continue
		}
		switch {
		case left.Meta != nil && left.Meta.Key == "skuid":
			var v json.Number
			if mt.Op == "!=" && json.Unmarshal(mt.Right, &v) == nil && v.String() == "0" {
				uidNot0 = true
			}
		case left.Payload != nil && left.Payload.Field == "daddr" && mt.Op == "==":
			var s string
			if json.Unmarshal(mt.Right, &s) == nil {
				if a, err := netip.ParseAddr(s); err == nil {
					ep.Addr = a
				}
			}
		case left.Payload != nil && left.Payload.Protocol == "tcp" && left.Payload.Field == "dport" && mt.Op == "==":
			var p int
			if json.Unmarshal(mt.Right, &p) == nil {
				ep.Port = p
			}
		}
	}
	return ep, ep.Addr.IsValid() && uidNot0 && reject
}

// missingEndpoints lists the wanted endpoints the installed rules do not
// close (a rule for every port of an address covers each of its ports).
func missingEndpoints(want, have []Endpoint) []Endpoint {
	var out []Endpoint
	for _, w := range want {
		ok := false
		for _, h := range have {
			if h.Addr == w.Addr && (h.Port == 0 || h.Port == w.Port) {
				ok = true
				break
			}
		}
		if !ok {
			out = append(out, w)
		}
	}
	return out
}

func (e Endpoint) String() string {
	if e.Port == 0 {
		return e.Addr.String()
	}
	return netip.AddrPortFrom(e.Addr, uint16(e.Port)).String()
}

// firewall is the bootstrap step: install, then verify, the IMDS rules.
func (b *boot) firewall(ctx context.Context) (string, error) {
	endpoints := append([]string{b.o.IMDSEndpoint}, b.o.RootOnly...)
	if b.haveUD {
		endpoints = append(endpoints, b.ud.Agent.IMDSEndpoint)
	}
	want, err := FirewallEndpoints(endpoints...)
	if err != nil {
		return "", err
	}
	if err := b.nft(ctx, []string{"-f", "-"}, FirewallRules(want)); err != nil {
		return "", fmt.Errorf("installing the IMDS firewall (nftables; the image's burst-imds-firewall unit needs the nftables package): %w", err)
	}
	out, err := b.nftOut(ctx, "-j", "list", "table", "inet", FirewallTable)
	if err != nil {
		return "", fmt.Errorf("verifying the IMDS firewall: %w", err)
	}
	have, err := ParseFirewall(out)
	if err != nil {
		return "", fmt.Errorf("verifying the IMDS firewall: %w", err)
	}
	if miss := missingEndpoints(want, have); len(miss) > 0 {
		return "", fmt.Errorf("verifying the IMDS firewall: no rule closes %v to non-root users after installing it", miss)
	}
	names := make([]string, len(want))
	for i, e := range want {
		names[i] = e.String()
	}
	b.log.Info("IMDS firewall in place: metadata for root only", "endpoints", names)
	b.firewalled = names
	return "", nil
}

// ParseEndpoint reads an Endpoint as String writes it: an address (every
// port) or address:port ([v6]:port).
func ParseEndpoint(s string) (Endpoint, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return Endpoint{Addr: a}, nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 {
		return Endpoint{}, fmt.Errorf("IMDS firewall endpoint %q: want an address or address:port", s)
	}
	return Endpoint{Addr: ap.Addr(), Port: int(ap.Port())}, nil
}

// CheckFirewall reads the installed rules (list: the output of `nft -j
// list table inet burst_imds`, listErr its failure) and returns the wanted
// endpoints they no longer close to non-root users; an error when the table
// cannot be read or parsed (gone, flushed). burst-agent runs it every
// minute.
func CheckFirewall(list []byte, listErr error, want []Endpoint) ([]Endpoint, error) {
	if listErr != nil {
		return want, fmt.Errorf("reading table inet %s: %w", FirewallTable, listErr)
	}
	have, err := ParseFirewall(list)
	if err != nil {
		return want, err
	}
	return missingEndpoints(want, have), nil
}

func (b *boot) nft(ctx context.Context, args []string, stdin string) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, b.o.Commands.Nft, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("running %s %s: %w: %s", b.o.Commands.Nft, strings.Join(args, " "), err, lastLines(out, 3))
	}
	return nil
}

func (b *boot) nftOut(ctx context.Context, args ...string) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, b.o.Commands.Nft, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("running %s %s: %w: %s", b.o.Commands.Nft, strings.Join(args, " "), err, lastLines([]byte(stderr.String()), 3))
	}
	return out, nil
}
