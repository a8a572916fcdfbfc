package sizing

import "strings"

// HBMBandwidth is a GPU's memory bandwidth in GB/s (10^9 bytes/s), from
// NVIDIA's datasheets, and where the figure comes from. Inference decode
// reads every weight (and the KV cache) once per generated token, so this,
// not the FLOPS peak, bounds its token rate.
type HBMBandwidth struct {
	GBps   float64
	Source string
}

var hbm = map[string]HBMBandwidth{
	"t4":                  {320, "NVIDIA T4 datasheet: 320 GB/s GDDR6"},
	"t4g":                 {320, "NVIDIA T4 datasheet (the g5g T4G is a T4): 320 GB/s"},
	"a10g":                {600, "NVIDIA A10 datasheet: 600 GB/s GDDR6 (no separate A10G sheet)"},
	"l4":                  {300, "NVIDIA L4 datasheet: 300 GB/s GDDR6"},
	"l40s":                {864, "NVIDIA L40S datasheet: 864 GB/s GDDR6"},
	"v100":                {900, "NVIDIA V100 SXM2 datasheet: 900 GB/s HBM2"},
	"a100":                {1555, "NVIDIA A100 datasheet: 1,555 GB/s HBM2 (40 GB SXM)"},
	"a100-80":             {2039, "NVIDIA A100 datasheet: 2,039 GB/s HBM2e (80 GB SXM)"},
	"h100":                {3350, "NVIDIA H100 datasheet: 3.35 TB/s HBM3 (SXM)"},
	"h200":                {4800, "NVIDIA H200 datasheet: 4.8 TB/s HBM3e"},
	"b200":                {8000, "NVIDIA HGX B200 datasheet: 8 TB/s HBM3e per GPU"},
	"b300":                {8000, "NVIDIA HGX B300 datasheet: 8 TB/s HBM3e per GPU"},
	"rtx-pro-server-6000": {1597, "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: 1,597 GB/s GDDR7"},
	"rtx-pro-4500":        {896, "NVIDIA RTX PRO 4500 Blackwell datasheet: 896 GB/s GDDR7"},
}

// BandwidthOf returns the memory bandwidth of a GPU model with memMiB of
// memory per GPU (the A100 comes in 40 and 80 GB parts with different
// bandwidths); ok is false for a model missing from the table.
func BandwidthOf(gpuModel string, memMiB int) (HBMBandwidth, bool) {
	m := strings.ToLower(gpuModel)
	if m == "a100" && memMiB >= 64<<10 {
		m = "a100-80"
	}
	b, ok := hbm[m]
	return b, ok
}

// Fabric is how a node's GPUs talk to each other and to other nodes.
type Fabric struct {
	NVLink bool // GPUs within the node joined by NVLink/NVSwitch (else PCIe)
	EFA    bool // Elastic Fabric Adapter (OS-bypass RDMA for NCCL) between nodes
	Gbps   int  // the instance's network bandwidth, from the catalog
	Mbps   int  // the same in Mbit/s (2,500 for a g6.xlarge)
}

// nvlinkFamilies have NVLink or NVSwitch between their GPUs (AWS instance
// type pages: P3dn NVLink; P4d/P4de NVSwitch 600 GB/s; P5/P5e/P5en NVSwitch
// 900 GB/s; P6 NVLink 5). Every other GPU type here joins its GPUs over PCIe.
var nvlinkFamilies = map[string]bool{"p3dn": true, "p4d": true, "p4de": true, "p5": true, "p5e": true, "p5en": true, "p6-b200": true, "p6-b300": true}

// efaTypes support EFA (AWS EC2 User Guide, "Elastic Fabric Adapter:
// supported instance types"): the P families' large sizes and the G
// families' 8xlarge and larger sizes. A type missing here is treated as
// having no EFA (TCP over ENA), the pessimistic choice.
var efaTypes = map[string]bool{
	"p3dn.24xlarge": true, "p4d.24xlarge": true, "p4de.24xlarge": true, "p5.48xlarge": true, "p5e.48xlarge": true,
	"p5en.48xlarge": true, "p6-b200.48xlarge": true, "p6-b300.48xlarge": true,
	"g4dn.8xlarge": true, "g4dn.12xlarge": true, "g4dn.16xlarge": true, "g4dn.metal": true,
	"g5.8xlarge": true, "g5.12xlarge": true, "g5.16xlarge": true, "g5.24xlarge": true, "g5.48xlarge": true,
	"g6.8xlarge": true, "g6.12xlarge": true, "g6.16xlarge": true, "g6.24xlarge": true, "g6.48xlarge": true,
	"g6e.8xlarge": true, "g6e.12xlarge": true, "g6e.16xlarge": true, "g6e.24xlarge": true, "g6e.48xlarge": true,
}

// fabricOf is the fabric of an instance type (family, name, network Mbps).
func fabricOf(family, name string, networkMbps int) Fabric {
	return Fabric{NVLink: nvlinkFamilies[family], EFA: efaTypes[name], Gbps: networkMbps / 1000, Mbps: networkMbps}
}
