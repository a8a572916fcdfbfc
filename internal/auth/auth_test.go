package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	tok, err := WriteNew(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteNew(path, false); err == nil {
		t.Error("overwrote an existing token without force")
	}
	got, err := LoadToken(path)
	if err != nil || got != tok {
		t.Fatalf("load: %q %v", got, err)
	}
	os.Chmod(path, 0o644)
	if _, err := LoadToken(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable token accepted: %v", err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	if _, err := LoadToken(short); err == nil {
		t.Error("short token accepted")
	}
	derived := filepath.Join(dir, "derived")
	os.WriteFile(derived, []byte(RouteToken(tok)+"\n"), 0o600)
	if _, err := LoadToken(derived); err == nil {
		t.Error("a route credential loaded as the admin token")
	}
}

func TestVerifyKinds(t *testing.T) {
	admin, _ := Generate()
	other, _ := Generate()
	now := time.Unix(1_800_000_000, 0)
	exp := now.Add(time.Hour)
	nt, err := IssueNode(admin, NodeClaims{InstanceID: "i-0123456789abcdef0", Node: "gpu-a100-3", Expires: exp})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Verify(admin, admin, now, nil); err != nil || !p.Admin {
		t.Errorf("admin: %+v %v", p, err)
	}
	p, err := Verify(admin, nt, now, nil)
	if err != nil || p.Admin || p.Node != "gpu-a100-3" || p.InstanceID != "i-0123456789abcdef0" || !p.Expires.Equal(exp) {
		t.Errorf("node: %+v %v", p, err)
	}
	if _, err := Verify(admin, nt, exp, nil); !errors.Is(err, ErrExpired) {
		t.Errorf("node credential at its expiry: %v, want ErrExpired", err)
	}
	if p, err := Verify(admin, RouteToken(admin), now, nil); err != nil || !p.Route || p.Admin || p.Node != "" {
		t.Errorf("route: %+v %v", p, err)
	}
	if p, err := Verify(admin, ReadOnlyToken(admin), now, nil); err != nil || !p.ReadOnly || p.Route || p.Admin {
		t.Errorf("read-only: %+v %v", p, err)
	}
	// domain separation: the MAC of one kind never verifies as another,
	// even over the same fields
	routeMAC := strings.TrimPrefix(RouteToken(admin), RoutePrefix)
	roMAC := strings.TrimPrefix(ReadOnlyToken(admin), ReadOnlyPrefix)
	if routeMAC == roMAC || routeMAC == mac(admin, KindNode, "route") || mac(admin, KindRoute, "x") == mac(admin, KindNode, "x") {
		t.Error("two credential kinds share a MAC")
	}
	if _, err := Verify(admin, ReadOnlyPrefix+routeMAC, now, nil); err == nil {
		t.Error("a route MAC verified as the read-only credential")
	}
	if _, err := Verify(admin, RoutePrefix+roMAC, now, nil); err == nil {
		t.Error("a read-only MAC verified as the route credential")
	}
	forgedNode := NodePrefix + "i-0123456789abcdef0:gpu-a100-3:" + "1800003600:" + mac(admin, KindRoute, "i-0123456789abcdef0", "gpu-a100-3", "1800003600")
	if _, err := Verify(admin, forgedNode, now, nil); err == nil {
		t.Error("a node credential with a route-key MAC verified")
	}
	foreign, _ := IssueNode(other, NodeClaims{InstanceID: "i-0123456789abcdef0", Node: "gpu-a100-3", Expires: exp})
	for name, bad := range map[string]string{
		"empty":            "",
		"truncated admin":  admin[:len(admin)-1],
		"foreign node":     foreign,
		"foreign route":    RouteToken(other),
		"other node":       strings.Replace(nt, "gpu-a100-3", "gpu-a100-4", 1),
		"other instance":   strings.Replace(nt, "i-0123456789abcdef0", "i-0123456789abcdef1", 1),
		"later expiry":     strings.Replace(nt, ":1800003600:", ":1900003600:", 1),
		"retired node v1":  "bn1:gpu:" + strings.Repeat("0", 64),
		"retired route v1": "br1:" + strings.Repeat("0", 64),
		"short fields":     "bn2:i-0123456789abcdef0:gpu",
	} {
		if _, err := Verify(admin, bad, now, nil); err == nil {
			t.Errorf("%s: accepted %q", name, bad)
		}
	}
}

func TestAccountTokens(t *testing.T) {
	admin, _ := Generate()
	other, _ := Generate()
	now := time.Now()
	exp := now.Add(24 * time.Hour)
	at, err := AccountToken(admin, "nlp", exp, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Verify(admin, at, now, nil)
	if err != nil || p.Account != "nlp" || p.Admin || p.Node != "" || p.Route || !p.Expires.Equal(exp.Truncate(time.Second)) {
		t.Errorf("account: %+v %v", p, err)
	}
	// the account token is not a node token of a node named like the account
	if _, err := Verify(admin, strings.Replace(at, "ba3:", "bn2:", 1), now, nil); err == nil {
		t.Error("an account credential passed as a node credential")
	}
	foreign, _ := AccountToken(other, "nlp", exp, 0)
	vision, _ := AccountToken(admin, "vision", exp, 0)
	f := strings.Split(at, ":") // ba3 nlp expiry generation mac
	later := strings.Join([]string{f[0], f[1], fmt.Sprint(exp.Add(time.Hour).Unix()), f[3], f[4]}, ":")
	newer := strings.Join([]string{f[0], f[1], f[2], "1", f[4]}, ":")
	padded := strings.Join([]string{f[0], f[1], "0" + f[2], f[3], f[4]}, ":")
	for _, bad := range []string{foreign, strings.Replace(at, "nlp", "vision", 1), vision[:len(vision)-1], "ba3:nlp", "ba3::" + strings.Repeat("0", 64),
		"ba3:a b:1:0:" + strings.Repeat("0", 64), later, newer, padded, strings.Replace(at, "ba3:", "ba1:", 1)} {
		if p, err := Verify(admin, bad, now, nil); err == nil {
			t.Errorf("accepted %q as %+v", bad, p)
		}
	}
	// the retired never-expiring form says so
	if _, err := Verify(admin, "ba2:nlp:"+strings.Repeat("0", 64), now, nil); !errors.Is(err, ErrRetired) {
		t.Errorf("ba2 credential: %v, want ErrRetired", err)
	}
	if _, err := Verify(admin, at, exp, nil); !errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), "burst-sizer token account nlp") {
		t.Errorf("at its expiry: %v, want ErrExpired saying how to get a new one", err)
	}
	gens := func(a string) int { return map[string]int{"nlp": 1}[a] }
	if _, err := Verify(admin, at, now, gens); !errors.Is(err, ErrRevoked) {
		t.Errorf("generation 0 after a rotation to 1: %v, want ErrRevoked", err)
	}
	if at1, _ := AccountToken(admin, "nlp", exp, 1); func() error { _, err := Verify(admin, at1, now, gens); return err }() != nil {
		t.Error("the new generation's credential is refused")
	}
	if _, err := Verify(admin, vision, now, gens); err != nil {
		t.Errorf("another account's credential after nlp's rotation: %v", err)
	}
	for _, bad := range []string{"", "a b", "x/y", strings.Repeat("a", 65), "<script>"} {
		if _, err := AccountToken(admin, bad, exp, 0); err == nil {
			t.Errorf("account token minted for %q", bad)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	os.WriteFile(path, []byte(at+strings.Repeat("0", 10)+"\n"), 0o600)
	if _, err := LoadToken(path); err == nil {
		t.Error("an account credential loaded as the admin token")
	}
}

func TestIssueNodeRefusesBadClaims(t *testing.T) {
	admin, _ := Generate()
	for _, c := range []NodeClaims{
		{InstanceID: "i-0123456789abcdef0", Node: "a:b", Expires: time.Unix(2e9, 0)},
		{InstanceID: "vol-0123", Node: "gpu", Expires: time.Unix(2e9, 0)},
		{InstanceID: "i-0123456789abcdef0", Node: "gpu"},
	} {
		if tok, err := IssueNode(admin, c); err == nil {
			t.Errorf("issued %q for %+v", tok, c)
		}
	}
}

func TestParseCredentialFile(t *testing.T) {
	for in, want := range map[string]string{
		"abc\n":             "abc",
		"  bn2:x:y:1:z \nj": "bn2:x:y:1:z",
	} {
		if got, err := ParseCredentialFile([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "\n", "a b\n", "tok\x00\n", strings.Repeat("a", 5000)} {
		if got, err := ParseCredentialFile([]byte(bad)); err == nil {
			t.Errorf("%q: accepted as %q", bad, got)
		}
	}
}

func FuzzParseCredentialFile(f *testing.F) {
	f.Add([]byte("bn2:i-0123456789abcdef0:gpu-1:1800000000:" + strings.Repeat("a", 64) + "\n"))
	f.Add([]byte("br2:00\r\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ParseCredentialFile(b)
		if err != nil {
			return
		}
		if tok == "" || strings.ContainsAny(tok, " \t\r\n\x00") || len(tok) > maxCredentialFile {
			t.Fatalf("accepted %q", tok)
		}
	})
}

func FuzzVerify(f *testing.F) {
	admin := strings.Repeat("k", 64)
	good, _ := IssueNode(admin, NodeClaims{InstanceID: "i-0123456789abcdef0", Node: "gpu-1", Expires: time.Unix(1_900_000_000, 0)})
	f.Add(good)
	f.Add(RouteToken(admin))
	f.Add(ReadOnlyToken(admin))
	f.Add("bn2:i-0:x:1:" + strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, tok string) {
		now := time.Unix(1_800_000_000, 0)
		p, err := Verify(admin, tok, now, nil)
		if err != nil {
			return
		}
		// only the credentials minted above verify
		if tok != good && tok != admin && tok != RouteToken(admin) && tok != ReadOnlyToken(admin) {
			t.Fatalf("forged %q verified as %+v", tok, p)
		}
		if c, err := ParseNode(tok); err == nil && (c.Node != p.Node || !c.Expires.Equal(p.Expires)) {
			t.Fatalf("claims %+v differ from principal %+v", c, p)
		}
	})
}
