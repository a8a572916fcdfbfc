// Package nodeid is the one rule that ties a cloud instance to its Slurm
// node: burst-resume tags every instance at launch (internal/cloud/ec2) and
// the node's bootstrap reads the tags back from instance metadata
// (internal/bootstrap). A single-node fleet carries TagNode = the node name;
// the instances of a multi-node fleet share one tag set, TagNodes = the node
// names by EC2 launch index ("n1,n2,..."), continued in TagNodes.2,
// TagNodes.3, ... past EC2's 256-character tag values; an instance's node is
// the entry at its ami-launch-index.
package nodeid

import (
	"fmt"
	"strconv"
	"strings"
)

// The tag keys that name nodes.
const (
	TagNode  = "burst:node"  // single-node fleet: the node name
	TagNodes = "burst:nodes" // multi-node fleet: "n1,n2,..." by launch index, continued in burst:nodes.2, .3, ...
)

// MaxTagValue is EC2's limit on a tag value.
const MaxTagValue = 256

// Tag is one tag key and value.
type Tag struct{ Key, Value string }

// Tags are the tags that name nodes on the instances of one fleet, nodes in
// launch-index order.
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
// TagNodes.2, ...; a reader of instance metadata asks for them one by one
// until one is missing.
func ListKey(i int) string {
	if i <= 1 {
		return TagNodes
	}
	return TagNodes + "." + strconv.Itoa(i)
}

// Of names the node of an instance from its tags and launch index: TagNode
// when present, else entry launchIndex of the TagNodes list. The error says
// what is missing.
func Of(tags map[string]string, launchIndex int) (string, error) {
	if n := tags[TagNode]; n != "" {
		return n, nil
	}
	s := tags[TagNodes]
	if s == "" {
		return "", fmt.Errorf("instance has neither a %s nor a %s tag (launch it through burst-resume, and enable instance metadata tags in the launch template)", TagNode, TagNodes)
	}
	for i := 2; ; i++ {
		v, ok := tags[ListKey(i)]
		if !ok {
			break
		}
		s += "," + v
	}
	nodes := strings.Split(s, ",")
	if launchIndex < 0 || launchIndex >= len(nodes) {
		return "", fmt.Errorf("ami-launch-index %d is outside the %d nodes of tag %s", launchIndex, len(nodes), TagNodes)
	}
	return nodes[launchIndex], nil
}
