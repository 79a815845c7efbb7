package fxshard_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
)

// The shard selector of a replica's buckets, for its list and watch, and
// the bucket of an object, to tell whether the replica owns it.
func ExampleBuckets() {
	buckets, err := fxshard.NewBuckets(8)
	if err != nil {
		panic(err)
	}
	sel, err := buckets.Selector(fxstore.ShardByNamespace, []int{7, 0, 1, 4})
	if err != nil {
		panic(err)
	}
	fmt.Println(sel)

	pod := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	bucket, err := buckets.Of(pod, fxstore.ShardByNamespace)
	if err != nil {
		panic(err)
	}
	matches, err := sel.Matches(pod)
	if err != nil {
		panic(err)
	}
	fmt.Println(bucket, matches)
	// Output:
	// shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0xa000000000000000') || shardRange(object.metadata.namespace, '0xe000000000000000', '0x10000000000000000')
	// 7 true
}
