package train

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var stepDone = regexp.MustCompile(`(?m)rank=0 step (\d+) done epoch=\d+ batch=\d+ loss=(\S+)$`)

// losses maps step -> the loss rank 0 logged for it (exact, as float.hex()).
func losses(log string) map[int]string {
	out := map[int]string{}
	for _, m := range stepDone.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		out[n] = m[2]
	}
	return out
}

func lastStep(log string) int {
	last := 0
	for n := range losses(log) {
		last = max(last, n)
	}
	return last
}

func grab(t *testing.T, log, pattern string) []string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no line matching %q in:\n%s", pattern, log)
	}
	return m
}

type manifest struct {
	Format    string `json:"format"`
	Step      int    `json:"step"`
	Epoch     int    `json:"epoch"`
	Batch     int    `json:"batch"`
	WorldSize int    `json:"world_size"`
	Reason    string `json:"reason"`
	Files     map[string]struct {
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"files"`
}

// readManifest reads a step's manifest and checks every part it names
// against its size and sha256; nil if the step has no manifest.
func readManifest(t *testing.T, dir string, step int) *manifest {
	t.Helper()
	d := filepath.Join(dir, fmt.Sprintf("step-%09d", step))
	b, err := os.ReadFile(filepath.Join(d, "manifest.json"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", d, err)
	}
	for name, want := range m.Files {
		data, err := os.ReadFile(filepath.Join(d, name))
		if err != nil {
			t.Fatalf("checkpoint %s lacks %s: %v", d, name, err)
		}
		sum := sha256.Sum256(data)
		if int64(len(data)) != want.Size || hex.EncodeToString(sum[:]) != want.SHA256 {
			t.Fatalf("checkpoint %s: %s is %d bytes sha256 %x; manifest says %d bytes %s", d, name, len(data), sum, want.Size, want.SHA256)
		}
	}
	return &m
}

// checkAllRanks checks that step is a complete checkpoint of both ranks,
// taken for reason.
func checkAllRanks(t *testing.T, dir string, step int, reason string) {
	t.Helper()
	m := readManifest(t, dir, step)
	if m == nil {
		t.Fatalf("step %d has no manifest in %s", step, dir)
	}
	var names []string
	for n := range m.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	if got, want := strings.Join(names, " "), "model.pt rank-00000.pt rank-00001.pt"; got != want || m.WorldSize != 2 || m.Step != step || m.Reason != reason {
		t.Fatalf("step %d manifest: files %q world %d step %d reason %q; want %q, 2, %d, %q", step, got, m.WorldSize, m.Step, m.Reason, want, step, reason)
	}
	if m.Epoch*ddpEpochLen+m.Batch != step {
		t.Fatalf("step %d manifest: position epoch %d batch %d", step, m.Epoch, m.Batch)
	}
}

func newestComplete(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	best := -1
	for _, e := range ents {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "step-"))
		if err != nil || !strings.HasPrefix(e.Name(), "step-") {
			continue
		}
		if n > best && readManifest(t, dir, n) != nil {
			best = n
		}
	}
	return best
}

func writeRequest(t *testing.T, dir, content string) {
	t.Helper()
	tmp := filepath.Join(dir, ".checkpoint-request.tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ".checkpoint-request")); err != nil {
		t.Fatal(err)
	}
}

func markerStep(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(b), "step=")))
	if err != nil {
		t.Fatalf("%s: %q is not step=N", path, b)
	}
	return n
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }
