package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// Instance tags that name the node (set at launch by internal/cloud/ec2).
const (
	TagNode  = "burst:node"  // single-node fleet: the node name
	TagNodes = "burst:nodes" // multi-node fleet: "n1,n2,..." by ami-launch-index, continued in burst:nodes.2, .3, ...
)

// NodeFromTags names the node an instance is from its tags and launch index:
// TagNode when present, else entry launchIndex of the TagNodes list (the
// same rule as internal/cloud/ec2.NodeOf, with reasons for failures).
func NodeFromTags(tags map[string]string, launchIndex int) (string, error) {
	if n := tags[TagNode]; n != "" {
		return n, nil
	}
	s := tags[TagNodes]
	if s == "" {
		return "", fmt.Errorf("instance has neither a %s nor a %s tag (launch it through burst-resume, and enable instance metadata tags in the launch template)", TagNode, TagNodes)
	}
	for i := 2; ; i++ {
		v, ok := tags[TagNodes+"."+strconv.Itoa(i)]
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

// nodeFromIMDS reads the instance's node tags and launch index from IMDS
// (IMDSv2; instance tags in metadata must be enabled).
func nodeFromIMDS(ctx context.Context, endpoint string) (string, error) {
	client := imds.New(imds.Options{Endpoint: endpoint, ClientEnableState: imds.ClientEnabled, EnableFallback: aws.FalseTernary})
	get := func(path string) (string, bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := client.GetMetadata(cctx, &imds.GetMetadataInput{Path: path})
		if err != nil {
			if isNotFound(err) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("reading %s from IMDS: %w", path, err)
		}
		defer out.Content.Close()
		b, err := io.ReadAll(io.LimitReader(out.Content, 64*1024))
		if err != nil {
			return "", false, fmt.Errorf("reading %s from IMDS: %w", path, err)
		}
		return strings.TrimSpace(string(b)), true, nil
	}
	tags := map[string]string{}
	v, ok, err := get("tags/instance/" + TagNode)
	if err != nil {
		return "", err
	}
	if ok {
		tags[TagNode] = v
		return NodeFromTags(tags, 0)
	}
	for i := 1; ; i++ {
		key := TagNodes
		if i > 1 {
			key += "." + strconv.Itoa(i)
		}
		v, ok, err := get("tags/instance/" + key)
		if err != nil {
			return "", err
		}
		if !ok {
			break
		}
		tags[key] = v
	}
	idx, ok, err := get("ami-launch-index")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errors.New("IMDS has no ami-launch-index")
	}
	n, err := strconv.Atoi(idx)
	if err != nil {
		return "", fmt.Errorf("IMDS ami-launch-index %q is not a number", idx)
	}
	return NodeFromTags(tags, n)
}

func isNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "StatusCode: 404")
}
