package ec2

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/cloud"
)

// SpotPrices returns the current spot price of each instance type in each
// zone that has a configured subnet, as spot offerings (latest price per
// pool, Linux/UNIX).
func (p *Provider) SpotPrices(ctx context.Context, instanceTypes []string) ([]cloud.Offering, error) {
	in := &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX"},
		StartTime:           aws.Time(p.opts.Now()),
	}
	for _, t := range instanceTypes {
		in.InstanceTypes = append(in.InstanceTypes, types.InstanceType(t))
	}
	latest := map[string]types.SpotPrice{}
	pg := ec2.NewDescribeSpotPriceHistoryPaginator(p.api, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrapErr(err, "reading spot prices", nil)
		}
		for _, sp := range page.SpotPriceHistory {
			k := string(sp.InstanceType) + "/" + aws.ToString(sp.AvailabilityZone)
			if old, ok := latest[k]; !ok || aws.ToTime(sp.Timestamp).After(aws.ToTime(old.Timestamp)) {
				latest[k] = sp
			}
		}
	}
	var out []cloud.Offering
	for _, sp := range latest {
		zone := aws.ToString(sp.AvailabilityZone)
		subnet, ok := p.opts.Subnets[zone]
		if !ok {
			continue
		}
		price, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
		if err != nil {
			continue
		}
		out = append(out, cloud.Offering{InstanceType: string(sp.InstanceType), Zone: zone, SubnetID: subnet, Capacity: cloud.Spot, PriceUSD: price})
	}
	sortOfferings(out)
	return out, nil
}

// TypeInfo is what EC2 says about an instance type.
type TypeInfo struct {
	Name         string
	VCPU         int
	MemoryMiB    int
	GPUs         int
	GPUModel     string // lower case, as Slurm GRES types are written ("a10g")
	GPUMemoryMiB int    // per GPU
}

// InstanceTypes describes instance types (all of them when names is empty).
func (p *Provider) InstanceTypes(ctx context.Context, names []string) ([]TypeInfo, error) {
	in := &ec2.DescribeInstanceTypesInput{}
	for _, n := range names {
		in.InstanceTypes = append(in.InstanceTypes, types.InstanceType(n))
	}
	var out []TypeInfo
	pg := ec2.NewDescribeInstanceTypesPaginator(p.api, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrapErr(err, "describing instance types", nil)
		}
		for _, t := range page.InstanceTypes {
			ti := TypeInfo{Name: string(t.InstanceType)}
			if t.VCpuInfo != nil {
				ti.VCPU = int(aws.ToInt32(t.VCpuInfo.DefaultVCpus))
			}
			if t.MemoryInfo != nil {
				ti.MemoryMiB = int(aws.ToInt64(t.MemoryInfo.SizeInMiB))
			}
			if t.GpuInfo != nil {
				for _, g := range t.GpuInfo.Gpus {
					ti.GPUs += int(aws.ToInt32(g.Count))
					ti.GPUModel = strings.ToLower(aws.ToString(g.Name))
					if g.MemoryInfo != nil {
						ti.GPUMemoryMiB = int(aws.ToInt32(g.MemoryInfo.SizeInMiB))
					}
				}
			}
			out = append(out, ti)
		}
	}
	return out, nil
}

func sortOfferings(offs []cloud.Offering) {
	sort.Slice(offs, func(i, j int) bool {
		if offs[i].PriceUSD != offs[j].PriceUSD {
			return offs[i].PriceUSD < offs[j].PriceUSD
		}
		return offs[i].Key() < offs[j].Key()
	})
}
