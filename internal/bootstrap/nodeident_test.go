package bootstrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNonce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state", "identity.nonce")
	n1, err := loadNonce(p)
	if err != nil || len(n1) != 64 {
		t.Fatalf("new nonce %q %v", n1, err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("nonce file mode %v", st.Mode())
	}
	if n2, err := loadNonce(p); err != nil || n2 != n1 {
		t.Fatalf("the nonce changed across boots: %q %q %v", n1, n2, err)
	}
	os.WriteFile(p, []byte("zz\n"), 0o600)
	if _, err := loadNonce(p); err == nil {
		t.Error("a corrupt nonce file accepted")
	}
}

func FuzzParseNonce(f *testing.F) {
	f.Add([]byte(strings.Repeat("ab", 32) + "\n"))
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := ParseNonce(b); err == nil && (len(n) != 64 || strings.Trim(n, "0123456789abcdef") != "") {
			t.Fatalf("accepted nonce %q", n)
		}
	})
}
