package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"image/png"
	"os"
	"testing"

	"github.com/burst-hpc/burst/test/browser"
)

const (
	xssJobName = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`
	xssComment = `burst: params=1B </code><script>window.__xss=3</script>`
)

// assertInert: the page ran none of the XSS attempts and holds no script
// or image element (the dashboard has neither; an injected one would).
func assertInert(t *testing.T, br *browser.Browser, ctx context.Context) {
	t.Helper()
	var got []any
	if err := br.Exec(ctx, `return [typeof window.__xss, document.querySelectorAll('script').length, document.querySelectorAll('img').length,
		Array.from(document.querySelectorAll('*')).filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length]`, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0] != "undefined" || got[1] != 0.0 || got[2] != 0.0 || got[3] != 0.0 {
		t.Errorf("the XSS attempt is live: [typeof __xss, scripts, images, on* attributes] = %v", got)
	}
	var names []string
	br.Exec(ctx, `return Array.from(document.querySelectorAll('[data-k$="job_name"]')).map(e => e.textContent)`, &names)
	shown := false
	for _, n := range names {
		shown = shown || n == xssJobName
	}
	if !shown && len(names) > 0 {
		t.Errorf("the XSS job name is not shown as its literal text: %q", names)
	}
}

// writePNG re-encodes a screenshot at the best compression (they are
// committed as documentation).
func writePNG(path string, b []byte) error {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("screenshot %s: %w", path, err)
	}
	var out bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, img); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// certSPKI is the base64 SHA-256 of the public key of the first
// certificate in a PEM file (Chromium's pin format).
func certSPKI(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return "", fmt.Errorf("%s: no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}
