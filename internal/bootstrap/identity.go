package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/nodeid"
)

// nodeFromIMDS reads the instance's node tags and launch index from IMDS
// (IMDSv2; instance tags in metadata must be enabled).
func nodeFromIMDS(ctx context.Context, endpoint string) (string, error) {
	client := imds.New(imds.Options{Endpoint: endpoint, Timeout: 10 * time.Second, Retry: true})
	get := func(path string) (string, bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		b, ok, err := client.Get(cctx, path)
		return strings.TrimSpace(string(b)), ok, err
	}
	tags := map[string]string{}
	v, ok, err := get("tags/instance/" + nodeid.TagNode)
	if err != nil {
		return "", err
	}
	if ok {
		tags[nodeid.TagNode] = v
		return nodeid.Of(tags, 0)
	}
	for i := 1; ; i++ {
		key := nodeid.ListKey(i)
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
	return nodeid.Of(tags, n)
}
