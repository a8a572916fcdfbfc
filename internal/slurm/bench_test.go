package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// bigSqueue replicates the jobs of a release's real sample to n jobs.
func bigSqueue(b *testing.B, rel string, n int) []byte {
	var doc map[string]any
	if err := json.Unmarshal(readTestdata(b, rel+"/squeue.json"), &doc); err != nil {
		b.Fatal(err)
	}
	src := doc["jobs"].([]any)
	jobs := make([]any, 0, n)
	for i := 0; i < n; i++ {
		j := map[string]any{}
		for k, v := range src[i%len(src)].(map[string]any) {
			j[k] = v
		}
		j["job_id"] = i + 1
		jobs = append(jobs, j)
	}
	doc["jobs"] = jobs
	out, err := json.Marshal(doc)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkParseJobsJSON parses 1000 real-shaped jobs of each release and
// reports the cost per job and the ratio to a generic json.Unmarshal into
// map[string]any of the same bytes, measured in the same run.
func BenchmarkParseJobsJSON(b *testing.B) {
	for _, rel := range releases {
		b.Run(rel, func(b *testing.B) {
			data := bigSqueue(b, rel, 1000)
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				jobs, err := ParseJobsJSON(data)
				if err != nil || len(jobs) != 1000 {
					b.Fatal(err, len(jobs))
				}
			}
			per := time.Since(start) / time.Duration(b.N)
			b.StopTimer()
			// Baseline, same bytes and iteration count, same run (testing.Benchmark
			// cannot be nested inside a benchmark).
			start = time.Now()
			for range b.N {
				var v map[string]any
				if err := json.Unmarshal(data, &v); err != nil {
					b.Fatal(err)
				}
			}
			base := time.Since(start) / time.Duration(b.N)
			b.ReportMetric(float64(per.Nanoseconds())/1000, "ns/job")
			b.ReportMetric(float64(per.Nanoseconds())/float64(base.Nanoseconds()), "x_generic_unmarshal")
		})
	}
}

func BenchmarkParseGRES(b *testing.B) {
	in := []string{"gpu:a10g:2", "gres:gpu:h100:8", "gpu:a100:4(S:0-1),nic:1", "gres/gpu:a10g=2"}
	for range b.N {
		for _, s := range in {
			if _, err := ParseGRES(s); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/string")
}

func BenchmarkParseResumeFile(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"jobs":[`)
	for i := 1; i <= 1000; i++ {
		if i > 1 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"job_id":%d,"nodes":"gpu-[%d-%d]"}`, i, i*2, i*2+1)
	}
	buf.WriteString(`],"all_nodes":"gpu-[2-2001]"}`)
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for range b.N {
		if _, err := ParseResumeFile(data); err != nil {
			b.Fatal(err)
		}
	}
}
