package selectors_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/sharding"

	"github.com/fxkube/fxkube/internal/selectors"
)

func shardRange(key, start, end string) sharding.ShardRangeRequirement {
	return sharding.ShardRangeRequirement{Key: key, Start: start, End: end}
}

// A shard selector's wire form reads back as the same selector; none is
// "".
func TestShard(t *testing.T) {
	tests := []struct {
		name string
		give sharding.Selector
		want string
	}{
		{"none", nil, ""},
		{"the lower half", sharding.NewSelector(shardRange(selectors.ByUID, "0x0000000000000000", "0x8000000000000000")),
			"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"},
		{"two ranges to the end", sharding.NewSelector(shardRange(selectors.ByNamespace, "0x0000000000000000", "0x4000000000000000"),
			shardRange(selectors.ByNamespace, "0xc000000000000000", "0x10000000000000000")),
			"shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := selectors.Shard(tt.give)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			back, err := selectors.ParseShard(got)
			require.NoError(t, err)
			again, err := selectors.Shard(back)
			require.NoError(t, err)
			require.Equal(t, got, again)
		})
	}
}

// Bad selectors and wire forms fail, saying why.
func TestShardRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		give sharding.Selector
		want string
	}{
		{"another key", sharding.NewSelector(shardRange("object.metadata.name", "0x0000000000000000", "0x8000000000000000")), `key "object.metadata.name" is not object.metadata.uid or object.metadata.namespace`},
		{"two keys", sharding.NewSelector(shardRange(selectors.ByUID, "0x0000000000000000", "0x1000000000000000"), shardRange(selectors.ByNamespace, "0x2000000000000000", "0x3000000000000000")), "shard on one key"},
		{"short bounds", sharding.NewSelector(shardRange(selectors.ByUID, "0x0", "0x8")), "16 lowercase hex digits"},
		{"upper case", sharding.NewSelector(shardRange(selectors.ByUID, "0x000000000000000A", "0x8000000000000000")), "16 lowercase hex digits"},
		{"empty range", sharding.NewSelector(shardRange(selectors.ByUID, "0x8000000000000000", "0x8000000000000000")), "its start must be below its end"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := selectors.Shard(tt.give)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err := selectors.ParseShard("shardRange(object.metadata.uid, '0x0')")
	require.ErrorContains(t, err, "is not shardRange(key, 'start', 'end')")
}
