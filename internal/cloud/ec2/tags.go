package ec2

import (
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/nodeid"
)

// Tag keys burst sets on every instance at launch.
const (
	TagCluster  = "burst:cluster"       // cluster name; scopes every IAM permission
	TagNode     = nodeid.TagNode        // Slurm node name (at launch, or by CreateTags right after a fleet launch)
	TagNodes    = nodeid.TagNodes       // node names of a multi-node fleet (at launch)
	TagJobID    = "burst:job-id"        // Slurm job id
	TagAccount  = "burst:account"       // Slurm account
	TagUser     = "burst:user"          // submitting user
	TagClass    = "burst:class"         // sizer class
	TagCapacity = "burst:capacity-type" // spot or on-demand
	// TagBlockEnd is the end (RFC 3339) of the Capacity Block an instance
	// runs in; only on those.
	TagBlockEnd = "burst:capacity-block-end"
)

// NodeOf tells which Slurm node an instance is, from its tags (the rule of
// internal/nodeid); "" when it cannot be told.
func NodeOf(tags map[string]string) string {
	n, err := nodeid.Of(tags)
	if err != nil {
		return ""
	}
	return n
}

func (p *Provider) identitiesOK(insts []cloud.Instance, names []string) bool {
	seen := map[string]bool{}
	for _, in := range insts {
		if in.Node == "" || seen[in.Node] {
			return false
		}
		seen[in.Node] = true
	}
	for _, n := range names {
		if !seen[n] {
			return false
		}
	}
	return true
}

func (p *Provider) tags(nodes []cloud.NodeSpec, capacity capacity.Type) []types.Tag {
	t := func(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }
	first := nodes[0]
	tags := []types.Tag{t(TagCluster, p.opts.Cluster), t(TagCapacity, string(capacity))}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Node
	}
	for _, nt := range nodeid.Tags(names) {
		tags = append(tags, t(nt.Key, nt.Value))
	}
	if first.JobID != 0 {
		tags = append(tags, t(TagJobID, strconv.FormatUint(uint64(first.JobID), 10)))
	}
	for k, v := range map[string]string{TagAccount: first.Account, TagUser: first.User, TagClass: first.Class} {
		if v != "" {
			tags = append(tags, t(k, v))
		}
	}
	extra := make([]string, 0, len(p.opts.ExtraTags))
	for k := range p.opts.ExtraTags {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	for _, k := range extra {
		tags = append(tags, t(k, p.opts.ExtraTags[k]))
	}
	sort.Slice(tags, func(i, j int) bool { return *tags[i].Key < *tags[j].Key })
	return tags
}
