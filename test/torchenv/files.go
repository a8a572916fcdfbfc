package torchenv

import (
	"archive/zip"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreePort returns a port that is free now and that the kernel does not
// hand out by itself: torchrun binds it a moment later, and a port from the
// ephemeral range could be taken in between by any socket of this busy
// machine (gloo's own listeners included).
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, _ = strconv.Atoi(f[0])
			hi, _ = strconv.Atoi(f[1])
		}
	}
	start := 20000 + int(rand.Uint32()%10000)
	for i := 0; i < 45000; i++ {
		p := 10000 + (start-10000+i)%55000
		if p >= lo && p <= hi {
			continue
		}
		if l, err := net.Listen("tcp", ":"+strconv.Itoa(p)); err == nil {
			l.Close()
			return p
		}
	}
	t.Fatalf("no free port outside the ephemeral range %d-%d", lo, hi)
	return 0
}

// TensorData reads the raw tensor storages of a torch.save file (a zip
// whose <archive>/data/<key> entries hold each storage's bytes), by key.
func TensorData(t testing.TB, path string) map[string][]byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer zr.Close()
	out := map[string][]byte{}
	for _, f := range zr.File {
		_, key, ok := strings.Cut(f.Name, "/data/")
		if !ok {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[key] = b
	}
	return out
}
