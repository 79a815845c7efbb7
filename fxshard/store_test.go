package fxshard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
)

// What fxshard.For refuses, each error naming the store and the fix; a
// refused store registers nothing.
func TestForRefuses(t *testing.T) {
	reg := fxstore.NewRegistry(clientgoscheme.Scheme)
	shards, err := fxshard.NewShards(reg, fake.NewClientset(), fxshard.Config{Namespace: "ops", Name: "app"})
	require.NoError(t, err)
	for _, tt := range []struct {
		name     string
		spec     fxstore.Spec
		shardKey string
		want     string
	}{
		{"a shard of its own", fxstore.Spec{Shard: sharding.NewSelector(sharding.ShardRangeRequirement{Key: fxstore.ShardByUID, Start: "0x0000000000000000", End: "0x8000000000000000"})},
			fxstore.ShardByUID, "): Spec.Shard is set; fxshard.For chooses each bucket's shard, leave it empty"},
		{"another key", fxstore.Spec{}, "object.metadata.name",
			`sharded store ConfigMap/v1 (all namespaces): shard key "object.metadata.name" is not supported; use fxstore.ShardByUID or fxstore.ShardByNamespace`},
		{"a bad spec", fxstore.Spec{LabelSelector: "a in ("}, fxstore.ShardByUID, `invalid label selector "a in ("`},
		{"one namespace by namespace", fxstore.Spec{Namespace: "team"}, fxstore.ShardByNamespace,
			`sharded store ConfigMap/v1 (namespace "team"): sharded by namespace, it selects one namespace, so all its objects would be in one bucket; shard it by fxstore.ShardByUID`},
		{"a namespace field by namespace", fxstore.Spec{FieldSelector: "metadata.namespace=team"}, fxstore.ShardByNamespace,
			"sharded by namespace, it selects one namespace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fxshard.For[*corev1.ConfigMap](shards, tt.spec, tt.shardKey)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	assert.Empty(t, shards.Info().Stores)
	assert.Empty(t, reg.Stores())
	_, err = fxshard.NewController[*corev1.ConfigMap]("x", nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "primary store is nil; pass the store fxshard.For returned")
}
