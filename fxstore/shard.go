package fxstore

import (
	"fmt"
	"strings"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
)

// Shard keys: what an object's shard is decided by (KEP-5866).
const (
	ShardByUID       = "object.metadata.uid"
	ShardByNamespace = "object.metadata.namespace"
)

// shardEnd is the exclusive end of the hash space, 2^64.
const shardEnd = "0x10000000000000000"

// probeShard is the shard selector checkShardSelectors asks with when it
// is given none: the lower half of the uids.
const probeShard = "shardRange(" + ShardByUID + ", '0x0000000000000000', '0x8000000000000000')"

// canonicalShardSelector checks a shard selector and returns its wire form,
// the ListOptions.shardSelector the API server takes ("" for none): every
// range on one key, ShardByUID or ShardByNamespace, with bounds of "0x" and
// 16 lowercase hex digits (the end may be 2^64) and start below end.
func canonicalShardSelector(sel sharding.Selector) (string, error) {
	if sel == nil || sel.Empty() {
		return "", nil
	}
	s := sel.String()
	reqs := sel.Requirements()
	for _, r := range reqs {
		if r.Key != ShardByUID && r.Key != ShardByNamespace {
			return "", fmt.Errorf("invalid shard selector %q: key %q is not %s or %s", s, r.Key, ShardByUID, ShardByNamespace)
		}
		if r.Key != reqs[0].Key {
			return "", fmt.Errorf("invalid shard selector %q: ranges on keys %q and %q; shard on one key", s, reqs[0].Key, r.Key)
		}
		if !shardBound(r.Start) || !shardBound(r.End) && r.End != shardEnd {
			return "", fmt.Errorf("invalid shard selector %q: bounds are 0x and 16 lowercase hex digits, such as 0x8000000000000000 (the end may be %s)", s, shardEnd)
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

// parseShardSelector reads back the wire form canonicalShardSelector
// returns (the form sharding.Selector.String writes; apimachinery has no
// parser, and the API server's takes a CEL environment), for the client-side
// filter.
func parseShardSelector(s string) (sharding.Selector, error) {
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
	if _, err := canonicalShardSelector(sel); err != nil {
		return nil, err
	}
	return sel, nil
}

// shardMatcher returns whether an object is in the shard of key, as the
// API server decides it; nil when the key is not sharded. An object whose
// shard cannot be told is not in it.
func shardMatcher(key Key) (func(k8sruntime.Object) bool, error) {
	if key.Shard == "" {
		return nil, nil
	}
	sel, err := parseShardSelector(key.Shard)
	if err != nil {
		return nil, err
	}
	return func(obj k8sruntime.Object) bool {
		ok, err := sel.Matches(obj)
		return err == nil && ok
	}, nil
}
