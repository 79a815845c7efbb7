package fxshard

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"

	"github.com/fxkube/fxkube/fxstore"
)

// DefaultBuckets is how many buckets the hash space is cut into when a
// count is not given.
const DefaultBuckets = 16

// hashSpaceEnd is the exclusive end of the hash space, 2^64, which does not
// fit 16 hex digits; the API server takes it as the one 17-digit bound.
const hashSpaceEnd = "0x10000000000000000"

// ErrNoBuckets is returned by Buckets.Selector for an empty set of buckets:
// a shard selector cannot select nothing (no ranges means everything), so a
// replica that owns no bucket must not list at all.
var ErrNoBuckets = errors.New("no buckets: a shard selector of no ranges selects everything; do not list when no bucket is owned")

// Buckets cuts the FNV-1a 64-bit hash space [0, 2^64) of a shard key into
// equal ranges, numbered from 0: bucket i holds the hashes h with
// floor(h*n/2^64) == i. Every replica of a sharded controller must use the
// same count. The zero Buckets has DefaultBuckets.
type Buckets struct {
	n uint64
}

// NewBuckets returns n buckets; n must be at least 1.
func NewBuckets(n int) (Buckets, error) {
	if n < 1 {
		return Buckets{}, fmt.Errorf("%d buckets: the hash space needs at least 1 bucket (%d is the default)", n, DefaultBuckets)
	}
	return Buckets{n: uint64(n)}, nil
}

// Len returns the number of buckets.
func (b Buckets) Len() int { return int(b.count()) }

func (b Buckets) count() uint64 {
	if b.n == 0 {
		return DefaultBuckets
	}
	return b.n
}

// OfHash returns the bucket of a hash.
func (b Buckets) OfHash(hash uint64) int {
	// The high word of hash*n is floor(hash*n/2^64), exact for every hash,
	// where a division of the space into widths would round.
	hi, _ := bits.Mul64(hash, b.count())
	return int(hi)
}

// Of returns the bucket of obj's shard key, fxstore.ShardByUID or fxstore.ShardByNamespace, hashed
// as the API server hashes it for a shardSelector.
func (b Buckets) Of(obj runtime.Object, key string) (int, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	value, err := sharding.ResolveFieldValue(obj, key)
	if err != nil {
		return 0, fmt.Errorf("shard key %s: %w", key, err)
	}
	return b.OfValue(value), nil
}

// OfValue returns the bucket of a shard key's value, hashed as the API
// server hashes it: any string a replica's share is decided by, such as
// a member cluster's name.
func (b Buckets) OfValue(value string) int {
	// HashField always writes 16 hex digits, which parse.
	hash, _ := strconv.ParseUint(sharding.HashField(value), 16, 64)
	return b.OfHash(hash)
}

// Selector returns the shard selector of the objects whose key (fxstore.ShardByUID or
// fxstore.ShardByNamespace) hashes into one of buckets: one range per run of contiguous
// buckets, in order. The order and repetitions of buckets do not matter.
// With no buckets it returns ErrNoBuckets.
func (b Buckets) Selector(key string, buckets []int) (sharding.Selector, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if len(buckets) == 0 {
		return nil, ErrNoBuckets
	}
	sorted := slices.Clone(buckets)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if first, last := sorted[0], sorted[len(sorted)-1]; first < 0 || last >= b.Len() {
		bad := first
		if first >= 0 {
			bad = last
		}
		return nil, fmt.Errorf("bucket %d is out of range: there are %d buckets, numbered 0 to %d", bad, b.Len(), b.Len()-1)
	}
	var reqs []sharding.ShardRangeRequirement
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j] == sorted[j-1]+1 {
			j++
		}
		reqs = append(reqs, sharding.ShardRangeRequirement{Key: key, Start: b.bound(sorted[i]), End: b.bound(sorted[j-1] + 1)})
		i = j
	}
	return sharding.NewSelector(reqs...), nil
}

// bound returns the first hash of bucket i, ceil(i*2^64/n), in the API
// server's form; bucket n is the end of the space.
func (b Buckets) bound(i int) string {
	if uint64(i) == b.count() {
		return hashSpaceEnd
	}
	q, r := bits.Div64(uint64(i), 0, b.count())
	if r != 0 {
		q++
	}
	return fmt.Sprintf("0x%016x", q)
}

func checkKey(key string) error {
	if key != fxstore.ShardByUID && key != fxstore.ShardByNamespace {
		return fmt.Errorf("shard key %q is not supported; use %s or %s", key, fxstore.ShardByUID, fxstore.ShardByNamespace)
	}
	return nil
}
