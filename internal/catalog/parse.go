package catalog

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// catalogColumns is the header of aws_gpu_instances.csv.
var catalogColumns = []string{"instance_type", "family", "gpu_name", "gpu_manufacturer", "gpu_count",
	"gpu_memory_mib", "vcpu", "memory_mib", "network_bandwidth_mbps", "local_nvme_gb",
	"od_usd_per_hour_us_east_1", "spot_savings_pct_us_east_1", "spot_interrupt_bucket_us_east_1"}

// advisorColumns is the header of the Spot Instance Advisor CSV.
var advisorColumns = []string{"region", "os", "instance_type", "vcpu", "ram_gb", "savings_pct_vs_ondemand",
	"interrupt_range_index", "interrupt_label", "interrupt_max_pct"}

func readCSV(r io.Reader, want []string, what string) ([][]string, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(want)
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("reading %s: empty file, want header %s", what, strings.Join(want, ","))
	}
	for i, h := range want {
		if rows[0][i] != h {
			return nil, fmt.Errorf("reading %s: header column %d is %q, want %q", what, i+1, rows[0][i], h)
		}
	}
	return rows[1:], nil
}

// ParseCatalogCSV parses aws_gpu_instances.csv. Empty numeric cells are 0
// (unknown); malformed cells are errors naming line and column.
func ParseCatalogCSV(r io.Reader) ([]InstanceType, error) {
	rows, err := readCSV(r, catalogColumns, "instance catalog")
	if err != nil {
		return nil, err
	}
	out := make([]InstanceType, 0, len(rows))
	for i, row := range rows {
		line := i + 2
		num := func(col int) (float64, error) {
			s := strings.TrimSpace(row[col])
			if s == "" {
				return 0, nil
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("instance catalog line %d column %s: %q is not a non-negative number", line, catalogColumns[col], s)
			}
			return v, nil
		}
		var f [9]float64
		for j, col := range []int{4, 5, 6, 7, 8, 9, 10, 11} {
			if f[j], err = num(col); err != nil {
				return nil, err
			}
		}
		t := InstanceType{
			Name: strings.TrimSpace(row[0]), Family: row[1], GPUModel: strings.ToLower(row[2]), GPUManufacturer: strings.ToLower(row[3]),
			GPUs: int(f[0]), GPUMemoryMiB: int(f[1]), VCPU: int(f[2]), MemoryMiB: int(f[3]), NetworkMbps: int(f[4]),
			LocalNVMeGB: int(f[5]), OnDemandUSD: f[6], Spot: Spot{Bucket: InterruptUnknown},
		}
		if t.Name == "" {
			return nil, fmt.Errorf("instance catalog line %d: empty instance_type", line)
		}
		if b := strings.TrimSpace(row[12]); b != "" {
			if t.Spot.Bucket, err = ParseInterruptBucket(b); err != nil {
				return nil, fmt.Errorf("instance catalog line %d: %w", line, err)
			}
			t.Spot.SavingsPct = f[7]
		}
		out = append(out, t)
	}
	return out, nil
}

// ParseAdvisorCSV parses the Spot Instance Advisor CSV, keeping Linux rows
// for the given types (all types when keep is nil).
func ParseAdvisorCSV(r io.Reader, keep map[string]bool) (map[string]map[string]Spot, error) {
	rows, err := readCSV(r, advisorColumns, "spot advisor data")
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]Spot{}
	for i, row := range rows {
		line := i + 2
		if row[1] != "Linux" || keep != nil && !keep[row[2]] {
			continue
		}
		sav, err := strconv.ParseFloat(row[5], 64)
		if err != nil || sav > 100 || sav < -1000 {
			// negative savings are real: spot can cost more than on-demand
			return nil, fmt.Errorf("spot advisor data line %d: savings %q is not a percentage", line, row[5])
		}
		b, err := ParseInterruptBucket(row[7])
		if err != nil {
			return nil, fmt.Errorf("spot advisor data line %d: %w", line, err)
		}
		if out[row[0]] == nil {
			out[row[0]] = map[string]Spot{}
		}
		out[row[0]][row[2]] = Spot{SavingsPct: sav, Bucket: b}
	}
	return out, nil
}
