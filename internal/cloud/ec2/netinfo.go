package ec2

import (
	"context"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// NetInfo is what the provider learns of an instance type's networking
// from DescribeInstanceTypes' NetworkInfo: whether it takes EFA
// interfaces, how many, and on how many network cards.
type NetInfo struct {
	EFA    bool // EfaSupported
	Cards  int  // MaximumNetworkCards (1 when EC2 does not say)
	MaxEFA int  // EfaInfo.MaximumEfaInterfaces
}

// EFAInterfaces is how many EFA interfaces a launch of the type gets: one
// per network card, as EC2 wants for the type's whole bandwidth, never
// more than the type allows; 0 without EFA.
func (n NetInfo) EFAInterfaces() int {
	if !n.EFA {
		return 0
	}
	return max(1, min(n.Cards, n.MaxEFA))
}

// netCache keeps each instance type's NetInfo for the provider's life
// (an instance type's network does not change).
type netCache struct {
	mu sync.Mutex
	m  map[string]NetInfo
}

// Network returns the NetInfo of each of the types, describing those it
// has not seen yet in one DescribeInstanceTypes call.
func (p *Provider) Network(ctx context.Context, typeNames []string) (map[string]NetInfo, error) {
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	if p.net.m == nil {
		p.net.m = map[string]NetInfo{}
	}
	var missing []types.InstanceType
	for _, t := range typeNames {
		if _, ok := p.net.m[t]; !ok && !slices.Contains(missing, types.InstanceType(t)) {
			missing = append(missing, types.InstanceType(t))
		}
	}
	for len(missing) > 0 {
		batch := missing[:min(len(missing), 100)]
		missing = missing[len(batch):]
		in := &ec2.DescribeInstanceTypesInput{InstanceTypes: batch}
		for {
			out, err := p.api.DescribeInstanceTypes(ctx, in)
			if err != nil {
				return nil, wrapErr(err, "describing the network of instance types", nil)
			}
			for _, it := range out.InstanceTypes {
				p.net.m[string(it.InstanceType)] = netInfoOf(it.NetworkInfo)
			}
			if aws.ToString(out.NextToken) == "" {
				break
			}
			in.NextToken = out.NextToken
		}
	}
	res := make(map[string]NetInfo, len(typeNames))
	for _, t := range typeNames {
		res[t] = p.net.m[t] // a type EC2 did not return: no EFA
	}
	return res, nil
}

func netInfoOf(ni *types.NetworkInfo) NetInfo {
	out := NetInfo{Cards: 1}
	if ni == nil {
		return out
	}
	out.EFA = aws.ToBool(ni.EfaSupported)
	if c := int(aws.ToInt32(ni.MaximumNetworkCards)); c > 0 {
		out.Cards = c
	}
	if ni.EfaInfo != nil {
		out.MaxEFA = int(aws.ToInt32(ni.EfaInfo.MaximumEfaInterfaces))
	}
	if out.EFA && out.MaxEFA == 0 {
		out.MaxEFA = 1
	}
	return out
}
