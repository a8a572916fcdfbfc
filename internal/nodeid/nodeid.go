// Package nodeid is the one rule that ties a cloud instance to its Slurm
// node: every instance carries TagNode = its node name. A single-node
// launch tags it at launch; a multi-node fleet's instances share one tag
// set at launch (TagNodes: the fleet's node names, "n1,n2,...", continued
// in TagNodes.2, TagNodes.3, ... past EC2's 256-character tag values), and
// burst-resume gives each instance its TagNode with CreateTags right after
// the fleet returns (internal/cloud/ec2). The ami-launch-index is never
// used: EC2 does not promise a fleet's indexes are 0..n-1. A node learns
// its name from the sizer's identity exchange, which reads TagNode from EC2.
package nodeid

import (
	"fmt"
	"strconv"
	"strings"
)

// The tag keys that name nodes.
const (
	TagNode  = "burst:node"  // the instance's node name
	TagNodes = "burst:nodes" // multi-node fleet: "n1,n2,..." at launch, continued in burst:nodes.2, .3, ...
)

// MaxTagValue is EC2's limit on a tag value.
const MaxTagValue = 256

// Tag is one tag key and value.
type Tag struct{ Key, Value string }

// Tags are the launch tags that name nodes on the instances of one fleet:
// TagNode for one node, the TagNodes list for several.
func Tags(nodes []string) []Tag {
	if len(nodes) == 1 {
		return []Tag{{TagNode, nodes[0]}}
	}
	var tags []Tag
	cur := ""
	flush := func() {
		key := TagNodes
		if len(tags) > 0 {
			key = TagNodes + "." + strconv.Itoa(len(tags)+1)
		}
		tags = append(tags, Tag{key, cur})
		cur = ""
	}
	for _, n := range nodes {
		add := n
		if cur != "" {
			add = "," + n
		}
		if len(cur)+len(add) > MaxTagValue {
			flush()
			add = n
		}
		cur += add
	}
	flush()
	return tags
}

// ListKey is the i-th key (from 1) of the TagNodes list: TagNodes,
// TagNodes.2, ...
func ListKey(i int) string {
	if i <= 1 {
		return TagNodes
	}
	return TagNodes + "." + strconv.Itoa(i)
}

// Fleet returns the node names a fleet's launch tags list ("" list when
// none).
func Fleet(tags map[string]string) []string {
	s := tags[TagNodes]
	if s == "" {
		return nil
	}
	for i := 2; ; i++ {
		v, ok := tags[ListKey(i)]
		if !ok {
			break
		}
		s += "," + v
	}
	return strings.Split(s, ",")
}

// Of names the node of an instance from its tags: TagNode. A fleet
// instance not tagged yet (between launch and CreateTags) has none.
func Of(tags map[string]string) (string, error) {
	if n := tags[TagNode]; n != "" {
		return n, nil
	}
	if len(Fleet(tags)) > 0 {
		return "", fmt.Errorf("fleet instance without its %s tag yet (burst-resume tags each right after launch)", TagNode)
	}
	return "", fmt.Errorf("instance has no %s tag (launch it through burst-resume)", TagNode)
}
