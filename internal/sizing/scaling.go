package sizing

import "fmt"

// The data-parallel scaling model. A job on N = nodes x GPUs-per-node GPUs
// runs at N x (peak x MFU) x efficiency, where
//
//	efficiency = intra x inter
//	intra = 1                               one GPU, or NVLink/NVSwitch
//	      = 1 - (1 - PCIeEfficiency) x v    several GPUs joined by PCIe
//	inter = 1                               one node
//	      = 1 - (1 - f) x v                 several nodes, f by fabric:
//	        EFAFastEfficiency  EFA at >= 400 Gbps per node (p4d, p4de, p5, p5e, p5en, p6)
//	        EFAEfficiency      EFA below 400 Gbps (p3dn, g4dn/g5/g6/g6e 8xlarge and larger)
//	        TCPEfficiency      no EFA (NCCL over TCP on ENA)
//
// and v is the job's communication volume relative to a DDP all-reduce of
// 16-bit gradients (Model.CommVolume: 1 for DDP and ZeRO-1/2, 1.5 for
// ZeRO-3, about 0.01 for LoRA). The inter-node factor does not fall further
// with more nodes: a ring all-reduce moves 2(N-1)/N of the gradients per
// GPU, which is nearly constant in N (Patarasuk & Yuan 2009; NCCL), and
// the large runs agree: Llama 3 (Meta 2024, Table 4) kept 400 of 430
// TFLOPS per GPU (0.93) going from 8,192 to 16,384 H100s on 400 Gbps RoCE,
// and Llama 2 (Touvron et al. 2023, §2.2.1) found 200 Gbps RoCE scaled
// "almost as well" as InfiniBand up to 2,000 GPUs.
//
// The constants and their sources:
//   - EFAFastEfficiency 0.95: the Llama 3 figure above (0.93 at 16K GPUs;
//     a few nodes lose less).
//   - EFAEfficiency 0.85 and TCPEfficiency 0.70: Horovod (Sergeev & Del
//     Balso 2018, §5) measured 90% scaling efficiency on 128 Pascal GPUs over
//     25 Gbit/s Ethernet for Inception V3 and ResNet-101 and 68% for the
//     communication-heavy VGG-16; burst takes the VGG-16 figure for
//     gradient-heavy LLM training over TCP, and halfway between for EFA
//     below 400 Gbps. These two are the weakest-sourced constants of the
//     model: no published AWS measurement for these instance types was
//     found.
//   - PCIeEfficiency 0.90: an assumption, stated as such: PCIe Gen4 x16
//     gives NCCL about 25 GB/s per GPU against 300-900 GB/s for NVLink.
//
// The MFU assumptions (GPUPerf) come from large multi-node runs, so a job on
// an NVLink node at efficiency 1 is what the calibration checks (README).
const (
	EFAFastEfficiency = 0.95
	EFAEfficiency     = 0.85
	TCPEfficiency     = 0.70
	PCIeEfficiency    = 0.90
	EFAFastGbps       = 400
)

// efficiency is Efficiency without the account (the planner's hot path).
func efficiency(f Fabric, nodes, gpn int, v float64) float64 {
	e := 1.0
	if gpn > 1 && !f.NVLink {
		e *= 1 - (1-PCIeEfficiency)*v
	}
	if nodes > 1 {
		fe := TCPEfficiency
		switch {
		case f.EFA && f.Gbps >= EFAFastGbps:
			fe = EFAFastEfficiency
		case f.EFA:
			fe = EFAEfficiency
		}
		e *= 1 - (1-fe)*v
	}
	return e
}

// Efficiency is the scaling efficiency of a job with communication volume
// v on nodes nodes of gpn GPUs joined by fabric f, and a short account of
// it.
func Efficiency(f Fabric, nodes, gpn int, v float64) (float64, string) {
	intra, inter := 1.0, 1.0
	var why []string
	if gpn > 1 && !f.NVLink {
		intra = 1 - (1-PCIeEfficiency)*v
		why = append(why, fmt.Sprintf("PCIe between GPUs %.3g", intra))
	}
	if nodes > 1 {
		fe, name := TCPEfficiency, "no EFA (TCP)"
		switch {
		case f.EFA && f.Gbps >= EFAFastGbps:
			fe, name = EFAFastEfficiency, fmt.Sprintf("EFA %d Gbps", f.Gbps)
		case f.EFA:
			fe, name = EFAEfficiency, fmt.Sprintf("EFA %d Gbps", f.Gbps)
		}
		inter = 1 - (1-fe)*v
		why = append(why, fmt.Sprintf("%s between nodes %.3g", name, inter))
	}
	e := intra * inter
	if len(why) == 0 {
		return e, ""
	}
	s := fmt.Sprintf("scaling efficiency %.3g (", e)
	for i, w := range why {
		if i > 0 {
			s += ", "
		}
		s += w
	}
	return e, s + ")"
}
