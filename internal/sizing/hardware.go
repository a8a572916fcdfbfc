package sizing

import (
	"strings"

	"github.com/burst-hpc/burst/internal/catalog"
)

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

// fabricOf is the fabric between nodes of an instance type when efa says
// whether the launch attaches EFA interfaces (burst does for a multi-node
// launch on an EFA-capable type, from the launch templates it makes; see
// internal/cloud/ec2): with them, EFA and the type's whole bandwidth
// (every network card, catalog.NetworkOf); without, TCP over the primary
// interface's card alone (100 Gbps of a p5.48xlarge's 3,200).
func fabricOf(t catalog.InstanceType, net catalog.Network, efa bool) Fabric {
	f := Fabric{NVLink: nvlinkFamilies[t.Family], Mbps: t.NetworkMbps}
	switch {
	case efa && net.EFA():
		f.EFA = true
	case net.Cards > 1 && net.CardMbps > 0:
		f.Mbps = net.CardMbps
	}
	f.Gbps = f.Mbps / 1000
	return f
}
