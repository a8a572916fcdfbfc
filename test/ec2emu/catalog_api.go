package ec2emu

import (
	"encoding/xml"
	"sort"
	"strconv"
	"strings"
)

// ---- DescribeSpotPriceHistory ----

type xSpotPrice struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
}

func (s *Server) describeSpotPriceHistory(q query, _ string) (any, *apiError) {
	types := q.strings("InstanceType")
	if len(types) == 0 {
		for _, t := range s.opts.Catalog.All() {
			if t.NVIDIA() {
				types = append(types, t.Name)
			}
		}
	}
	zones := map[string]bool{}
	for _, z := range s.opts.Subnets {
		zones[z] = true
	}
	var zl []string
	if z := q.get("AvailabilityZone"); z != "" {
		zl = []string{z}
	} else {
		for z := range zones {
			zl = append(zl, z)
		}
		sort.Strings(zl)
	}
	now := s.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	var out []xSpotPrice
	for _, t := range types {
		if _, ok := s.opts.Catalog.Lookup(t); !ok {
			return nil, invalid("The instance type '%s' does not exist", t)
		}
		for _, z := range zl {
			if p := s.spotPrice(t, z); p > 0 {
				out = append(out, xSpotPrice{z, t, "Linux/UNIX", strconv.FormatFloat(p, 'f', 6, 64), now})
			}
		}
	}
	return struct {
		XMLName             xml.Name           `xml:"x"`
		SpotPriceHistorySet xItems[xSpotPrice] `xml:"spotPriceHistorySet"`
		NextToken           string             `xml:"nextToken"`
	}{SpotPriceHistorySet: xItems[xSpotPrice]{out}}, nil
}

// ---- DescribeInstanceTypes ----

type xMem struct {
	SizeInMiB int `xml:"sizeInMiB"`
}

type xGPU struct {
	Name         string `xml:"name"`
	Manufacturer string `xml:"manufacturer"`
	Count        int    `xml:"count"`
	MemoryInfo   xMem   `xml:"memoryInfo"`
}

type xInstanceType struct {
	InstanceType          string         `xml:"instanceType"`
	CurrentGeneration     bool           `xml:"currentGeneration"`
	SupportedUsageClasses xItems[string] `xml:"supportedUsageClasses"`
	VCPUInfo              struct {
		DefaultVCpus int `xml:"defaultVCpus"`
	} `xml:"vCpuInfo"`
	MemoryInfo xMem `xml:"memoryInfo"`
	GPUInfo    *struct {
		GPUs                xItems[xGPU] `xml:"gpus"`
		TotalGpuMemoryInMiB int          `xml:"totalGpuMemoryInMiB"`
	} `xml:"gpuInfo,omitempty"`
	NetworkInfo *xNetworkInfo `xml:"networkInfo,omitempty"`
}

func (s *Server) describeInstanceTypes(q query, _ string) (any, *apiError) {
	names := q.strings("InstanceType")
	all := len(names) == 0
	if all {
		for _, t := range s.opts.Catalog.All() {
			names = append(names, t.Name)
		}
	}
	start := 0
	if t := q.get("NextToken"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > len(names) {
			return nil, errf(400, "InvalidPaginationToken", "The pagination token is invalid")
		}
		start = n
	}
	maxResults, err := q.int("MaxResults", 100)
	if err != nil || maxResults < 5 || maxResults > 100 {
		return nil, invalid("MaxResults must be between 5 and 100")
	}
	end, next := len(names), ""
	if all && start+maxResults < end {
		end = start + maxResults
		next = strconv.Itoa(end)
	}
	var out []xInstanceType
	for _, n := range names[start:end] {
		t, ok := s.opts.Catalog.Lookup(n)
		if !ok {
			return nil, errf(400, "InvalidInstanceType", "The following supplied instance types do not exist: [%s]", n)
		}
		x := xInstanceType{InstanceType: t.Name, CurrentGeneration: true, MemoryInfo: xMem{t.MemoryMiB},
			SupportedUsageClasses: xItems[string]{[]string{"on-demand", "spot"}}}
		x.VCPUInfo.DefaultVCpus = t.VCPU
		x.NetworkInfo = s.networkInfo(t.Name)
		if t.GPUs > 0 {
			x.GPUInfo = &struct {
				GPUs                xItems[xGPU] `xml:"gpus"`
				TotalGpuMemoryInMiB int          `xml:"totalGpuMemoryInMiB"`
			}{GPUs: xItems[xGPU]{[]xGPU{{strings.ToUpper(t.GPUModel), title(t.GPUManufacturer), t.GPUs, xMem{t.GPUMemoryMiB}}}},
				TotalGpuMemoryInMiB: t.TotalGPUMemoryMiB()}
		}
		out = append(out, x)
	}
	return struct {
		XMLName         xml.Name              `xml:"x"`
		InstanceTypeSet xItems[xInstanceType] `xml:"instanceTypeSet"`
		NextToken       string                `xml:"nextToken,omitempty"`
	}{InstanceTypeSet: xItems[xInstanceType]{out}, NextToken: next}, nil
}

func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
