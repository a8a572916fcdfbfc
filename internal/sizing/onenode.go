package sizing

import (
	"fmt"
	"strings"
)

// memoryRefusal is the decision for an explicit request the model is
// certain cannot hold (beyond the margin of margin.go), with the numbers
// and how to fix it. --gres/--gpus-per-node without --nodes keeps one node
// (issue 31: QLoRA on one larger GPU beats three small nodes unless the
// user asks for them), so such a request is not sharded across nodes to
// make it fit; the refusal names the cheapest class that holds the job on
// one node and the --nodes that shards it on the GPUs asked for, with its
// network cost.
func (p *Policy) memoryRefusal(r Request, base need, asked, free searchResult, in RouteInput) Decision {
	d := Decision{Refused: true, Nodes: r.nodes(), GPUsPerNode: r.GPUsPerNode, Explicit: r.Explicit.names(), Reason: "predicted out of GPU memory",
		NeedGPUMemPerGPUGiB: round2(firstNeedGiB(p, r, base)), HistoryKey: in.History.Key}
	msg := fmt.Sprintf("job refused: what you asked for (%s) cannot hold this job: %s", askedText(r), strings.Join(asked.memShort, "; "))
	if !r.Explicit.GPUs || r.Explicit.Nodes {
		if free.best != nil {
			msg += fmt.Sprintf(". A plan that fits: %s (est. %s); %s", describePlan(free.best), costText(free.best), dropHint(r.Explicit))
		}
		d.RefuseMessage = msg
		return d
	}
	msg += ". --gres/--gpus-per-node without --nodes keeps one node"
	one := r
	one.Explicit, one.Nodes, one.GPUsPerNode, one.GPUModel = Explicit{Nodes: true, Partition: r.Explicit.Partition}, 1, 0, ""
	if res := p.search(one, base, in.Unavailable); res.best != nil {
		b := res.best
		msg += fmt.Sprintf(". To run it on one node, ask for --gres gpu:%s:%d: %s (est. %s), the cheapest class that holds it on one node", b.class.GPUModel, b.gpn, describePlan(b), costText(b))
	} else {
		msg += ". No class burst is configured with holds it on one node"
	}
	if res := p.search(r, base, in.Unavailable); res.best != nil {
		b := res.best
		msg += fmt.Sprintf(". To shard it across nodes on the GPUs you asked for, add --nodes %d: %s (est. %s)", b.nodes, describePlan(b), costText(b))
		if b.netNote != "" {
			msg += ", " + b.networkBound()
		} else if b.eff < 1 {
			msg += fmt.Sprintf(", at %.2g of the GPUs' speed across nodes", b.eff)
		}
	}
	d.RefuseMessage = msg
	return d
}
