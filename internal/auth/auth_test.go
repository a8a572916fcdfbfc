package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
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

	if p, err := Verify(tok, tok); err != nil || !p.Admin {
		t.Errorf("admin: %+v %v", p, err)
	}
	nt := NodeToken(tok, "gpu-a100-3")
	p, err := Verify(tok, nt)
	if err != nil || p.Admin || p.Node != "gpu-a100-3" || !p.MayReportFor("gpu-a100-3") || p.MayReportFor("gpu-a100-4") {
		t.Errorf("node: %+v %v", p, err)
	}
	rt := RouteToken(tok)
	if p, err := Verify(tok, rt); err != nil || !p.Route || p.Admin || p.Node != "" || p.MayReportFor("x") {
		t.Errorf("route: %+v %v", p, err)
	}
	other, _ := Generate()
	if _, err := Verify(tok, RouteToken(other)); err == nil {
		t.Error("foreign route token accepted")
	}
	for _, bad := range []string{"", tok[:len(tok)-1], NodeToken(other, "gpu-a100-3"), strings.Replace(nt, "gpu-a100-3", "gpu-a100-4", 1), "bn1:x", "bn1::" + strings.Repeat("0", 64)} {
		if _, err := Verify(tok, bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestAccountTokens(t *testing.T) {
	admin, _ := Generate()
	other, _ := Generate()
	at, err := AccountToken(admin, "nlp")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Verify(admin, at)
	if err != nil || p.Account != "nlp" || p.Admin || p.Node != "" || p.Route || p.MayReportFor("nlp") {
		t.Errorf("account: %+v %v", p, err)
	}
	// the account token is not a node token of a node named like the account
	if _, err := Verify(admin, strings.Replace(at, "ba1:", "bn1:", 1)); err == nil {
		t.Error("an account credential passed as a node credential")
	}
	foreign, _ := AccountToken(other, "nlp")
	vision, _ := AccountToken(admin, "vision")
	for _, bad := range []string{foreign, strings.Replace(at, "nlp", "vision", 1), vision[:len(vision)-1], "ba1:nlp", "ba1::" + strings.Repeat("0", 64),
		"ba1:a b:" + strings.Repeat("0", 64)} {
		if p, err := Verify(admin, bad); err == nil {
			t.Errorf("accepted %q as %+v", bad, p)
		}
	}
	for _, bad := range []string{"", "a b", "x/y", strings.Repeat("a", 65), "<script>"} {
		if _, err := AccountToken(admin, bad); err == nil {
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
