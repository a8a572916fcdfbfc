package simulate

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/sizer/trace"
)

func TestWriteSVGIsWellFormed(t *testing.T) {
	res, err := Run(t.Context(), handOptions(t), []trace.Job{job(0, 3600, 1), job(1800, 3600, 8), job(4000, 1800, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, res, "a <test> & title"); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	polylines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("svg is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if polylines != 2*len(res.Policies) {
		t.Errorf("%d polylines, want %d (two panels x %d policies)", polylines, 2*len(res.Policies), len(res.Policies))
	}
	if !strings.Contains(b.String(), "a &lt;test&gt; &amp; title") {
		t.Error("title not escaped")
	}
}

func TestJSONFields(t *testing.T) {
	res, err := Run(t.Context(), handOptions(t), []trace.Job{job(0, 3600, 1)})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Policies []map[string]any `json:"policies"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for _, p := range v.Policies {
		for _, k := range []string{"name", "cost_usd", "gpu_hours_billed", "gpu_hours_used", "wait_p50_s", "wait_p95_s", "wait_p99_s", "lost_gpu_hours", "idle_gpu_hours", "launches", "savings_vs_static_pct", "savings_vs_idle_timeout_pct"} {
			if _, ok := p[k]; !ok {
				t.Errorf("policy %v lacks %q", p["name"], k)
			}
		}
	}
}

func TestTableAndNumberFormats(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0.00"}, {99.5, "99.50"}, {1234567.4, "1,234,567"}, {-4321, "-4,321"}, {100, "100"}} {
		if got := num(c.v); got != c.want {
			t.Errorf("num(%g) = %q, want %q", c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		s    float64
		want string
	}{{45, "45s"}, {120, "2.0m"}, {7200, "2.0h"}, {3 * 86400, "3.0d"}} {
		if got := dur(c.s); got != c.want {
			t.Errorf("dur(%g) = %q, want %q", c.s, got, c.want)
		}
	}
}
