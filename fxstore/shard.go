package fxstore

import (
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/fxkube/fxkube/internal/selectors"
)

// Shard keys: what an object's shard is decided by (KEP-5866).
const (
	ShardByUID       = selectors.ByUID
	ShardByNamespace = selectors.ByNamespace
)

// probeShard is the shard selector checkShardSelectors asks with when it
// is given none: the lower half of the uids.
const probeShard = "shardRange(" + ShardByUID + ", '0x0000000000000000', '0x8000000000000000')"

// shardMatcher returns whether an object is in the shard of key, as the
// API server decides it; nil when the key is not sharded. An object whose
// shard cannot be told is not in it.
func shardMatcher(key Key) (func(k8sruntime.Object) bool, error) {
	if key.Shard == "" {
		return nil, nil
	}
	sel, err := selectors.ParseShard(key.Shard)
	if err != nil {
		return nil, err
	}
	return func(obj k8sruntime.Object) bool {
		ok, err := sel.Matches(obj)
		return err == nil && ok
	}, nil
}
