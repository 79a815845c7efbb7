package selectors

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/sharding"
)

// The keys an object's shard is decided by (KEP-5866).
const (
	ByUID       = "object.metadata.uid"
	ByNamespace = "object.metadata.namespace"
)

// hashEnd is the exclusive end of the hash space, 2^64.
const hashEnd = "0x10000000000000000"

// Shard checks a shard selector and returns its wire form,
// the ListOptions.shardSelector the API server takes ("" for none): every
// range on one key, ByUID or ByNamespace, with bounds of "0x" and
// 16 lowercase hex digits (the end may be 2^64) and start below end.
func Shard(sel sharding.Selector) (string, error) {
	if sel == nil || sel.Empty() {
		return "", nil
	}
	s := sel.String()
	reqs := sel.Requirements()
	for _, r := range reqs {
		if r.Key != ByUID && r.Key != ByNamespace {
			return "", fmt.Errorf("invalid shard selector %q: key %q is not %s or %s", s, r.Key, ByUID, ByNamespace)
		}
		if r.Key != reqs[0].Key {
			return "", fmt.Errorf("invalid shard selector %q: ranges on keys %q and %q; shard on one key", s, reqs[0].Key, r.Key)
		}
		if !shardBound(r.Start) || !shardBound(r.End) && r.End != hashEnd {
			return "", fmt.Errorf("invalid shard selector %q: bounds are 0x and 16 lowercase hex digits, such as 0x8000000000000000 (the end may be %s)", s, hashEnd)
		}
		if !sharding.HexLess(r.Start, r.End) {
			return "", fmt.Errorf("invalid shard selector %q: range %s to %s is empty; its start must be below its end", s, r.Start, r.End)
		}
	}
	return s, nil
}

func shardBound(s string) bool {
	hex, ok := strings.CutPrefix(s, "0x")
	if !ok || len(hex) != 16 {
		return false
	}
	for _, c := range hex {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseShard reads back the wire form Shard returns (the form sharding.Selector.String writes; apimachinery has no
// parser, and the API server's takes a CEL environment), for the client-side
// filter.
func ParseShard(s string) (sharding.Selector, error) {
	if s == "" {
		return sharding.Everything(), nil
	}
	var reqs []sharding.ShardRangeRequirement
	for part := range strings.SplitSeq(s, " || ") {
		inner, prefixed := strings.CutPrefix(part, "shardRange(")
		inner, suffixed := strings.CutSuffix(inner, ")")
		if !prefixed || !suffixed {
			return nil, fmt.Errorf("invalid shard selector %q: %q is not shardRange(key, 'start', 'end')", s, part)
		}
		args := strings.Split(inner, ", ")
		if len(args) != 3 {
			return nil, fmt.Errorf("invalid shard selector %q: %q is not shardRange(key, 'start', 'end')", s, part)
		}
		reqs = append(reqs, sharding.ShardRangeRequirement{Key: args[0], Start: strings.Trim(args[1], "'"), End: strings.Trim(args[2], "'")})
	}
	sel := sharding.NewSelector(reqs...)
	if _, err := Shard(sel); err != nil {
		return nil, err
	}
	return sel, nil
}
