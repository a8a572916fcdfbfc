package catalog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/shareddatatest"
)

func TestDefaultCatalog(t *testing.T) {
	c := Default()
	g5, ok := c.Lookup("g5.xlarge")
	if !ok {
		t.Fatal("g5.xlarge missing")
	}
	if g5.GPUModel != "a10g" || g5.GPUs != 1 || g5.GPUMemoryMiB != 22888 || g5.VCPU != 4 || g5.OnDemandUSD != 1.006 {
		t.Fatalf("g5.xlarge: %+v", g5)
	}
	// spot = on-demand x (1 - savings), savings 59% in the snapshot
	if got, want := g5.SpotUSD(), 1.006*(1-0.59); got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("SpotUSD = %v, want %v", got, want)
	}
	if g5.Spot.Bucket != InterruptOver20 || g5.Spot.Bucket.MonthlyRate() != 0.25 {
		t.Fatalf("bucket %v", g5.Spot.Bucket)
	}
	if _, ok := c.Lookup("m5.large"); ok {
		t.Fatal("a CPU type in the GPU catalog")
	}
	if len(c.All()) != 83 {
		t.Fatalf("want the 83 types of the source CSV, got %d", len(c.All()))
	}
	if s, ok := c.SpotIn("us-west-2", "g5.xlarge"); !ok || s.Bucket == InterruptUnknown {
		t.Fatalf("no us-west-2 spot data for g5.xlarge: %+v", s)
	}
}

func TestMatchingCheapestFirst(t *testing.T) {
	c := Default()
	m := c.Cheapest(Shape{GPUs: 1, MinGPUMemoryMiB: 20000}, 3)
	if len(m) != 3 {
		t.Fatalf("want 3, got %d", len(m))
	}
	for i := 1; i < len(m); i++ {
		if m[i].OnDemandUSD < m[i-1].OnDemandUSD {
			t.Fatalf("not cheapest first: %v", m)
		}
	}
	for _, typ := range m {
		if !typ.NVIDIA() || typ.GPUMemoryMiB < 20000 {
			t.Fatalf("%s does not fit", typ.Name)
		}
	}
	h100 := c.Matching(Shape{GPUModel: "H100", GPUs: 8, ExactGPUs: true})
	if len(h100) != 1 || h100[0].Name != "p5.48xlarge" {
		t.Fatalf("8 x H100: %v", h100)
	}
	if got := c.Matching(Shape{GPUModel: "h100", GPUs: 16}); len(got) != 0 {
		t.Fatalf("no 16-GPU H100 type exists, got %v", got)
	}
	models := c.GPUModels()
	if !strings.Contains(strings.Join(models, ","), "a10g,b200") {
		t.Fatalf("GPU models %v", models)
	}
}

func TestParseErrors(t *testing.T) {
	header := strings.Join(catalogColumns, ",") + "\n"
	cases := map[string]string{
		"":                       "empty file",
		"instance_type,family\n": "wrong number of fields",
		header + "g5.xlarge,g5,a10g,nvidia,one,1,4,16384,1,1,1,50,<5%\n": "line 2 column gpu_count",
		header + "g5.xlarge,g5,a10g,nvidia,1,1,4,16384,1,1,1,50,often\n": "unknown spot interruption bucket",
		header + ",g5,a10g,nvidia,1,1,4,16384,1,1,1,50,<5%\n":            "empty instance_type",
	}
	for in, want := range cases {
		if _, err := ParseCatalogCSV(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
	if _, err := New([]InstanceType{{Name: "a"}, {Name: "a"}}, nil); err == nil {
		t.Error("duplicate type accepted")
	}
}

// TestGeneratedUpToDate regenerates the catalog from the shared data
// (internal/shareddatatest; on a plain clone the committed catalog_data.go is
// used as is) and compares it with the committed file.
func TestGeneratedUpToDate(t *testing.T) {
	cat := shareddatatest.Require(t, "catalog/aws_gpu_instances.csv")
	f, _ := os.Open(cat)
	defer f.Close()
	types, err := ParseCatalogCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(types) != len(generatedTypes) {
		t.Fatalf("shared data has %d types, catalog_data.go %d: run make generate", len(types), len(generatedTypes))
	}
	for i := range types {
		if types[i] != generatedTypes[i] {
			t.Fatalf("type %s differs from catalog_data.go: run make generate", types[i].Name)
		}
	}
}

func FuzzParseCatalogCSV(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "data", "catalog", "aws_gpu_instances.csv"))
	if err == nil {
		f.Add(data)
	}
	f.Add([]byte(strings.Join(catalogColumns, ",") + "\ng5.xlarge,g5,a10g,nvidia,1,22888,4,16384,2500,250,1.006,59,>20%\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		types, err := ParseCatalogCSV(bytes.NewReader(b))
		if err != nil {
			return
		}
		if _, err := New(types, nil); err != nil {
			return
		}
		for _, ty := range types {
			if ty.Name == "" || ty.OnDemandUSD < 0 || ty.GPUs < 0 {
				t.Fatalf("parsed an invalid type %+v", ty)
			}
		}
	})
}
