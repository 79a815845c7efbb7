package fxshard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/fxkube/fxkube/fxstore"
)

func TestNewBuckets(t *testing.T) {
	for _, n := range []int{0, -1, math.MinInt} {
		_, err := NewBuckets(n)
		require.Error(t, err, "n=%d", n)
		assert.Contains(t, err.Error(), "at least 1 bucket")
	}
	for _, n := range []int{1, 16, 1 << 20} {
		b, err := NewBuckets(n)
		require.NoError(t, err)
		assert.Equal(t, n, b.Len())
	}
	assert.Equal(t, DefaultBuckets, Buckets{}.Len(), "the zero Buckets has the default count")
}

// counts are bucket counts whose edges fall on powers of two and between.
var counts = []int{1, 2, 3, 7, 16, 100, 1000}

// bounds returns the start and end of each bucket as the API server reads
// them: [start, end) with 2^64 as end beyond uint64.
func bounds(t *testing.T, b Buckets) (starts []uint64, lastEnd string) {
	t.Helper()
	for i := range b.Len() {
		s := b.bound(i)
		require.Regexp(t, `^0x[0-9a-f]{16}$`, s)
		v, err := strconv.ParseUint(s[2:], 16, 64)
		require.NoError(t, err)
		starts = append(starts, v)
	}
	return starts, b.bound(b.Len())
}

func TestOfHashEveryHashInOneBucket(t *testing.T) {
	for _, n := range counts {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			b, err := NewBuckets(n)
			require.NoError(t, err)
			starts, end := bounds(t, b)
			require.Equal(t, hashSpaceEnd, end)
			require.Equal(t, uint64(0), starts[0], "the first bucket starts at 0")

			// Equal widths: 2^64/n, give or take one.
			width := func(i int) uint64 {
				if i == n-1 {
					return -starts[i] // 2^64 - start, modulo 2^64
				}
				return starts[i+1] - starts[i]
			}
			if n > 1 {
				for i := range n {
					w0, w := width(0), width(i)
					assert.True(t, w == w0 || w == w0+1 || w+1 == w0, "bucket %d is %d wide, bucket 0 %d", i, w, w0)
				}
			}

			hashes := []uint64{0, math.MaxUint64}
			for _, s := range starts {
				hashes = append(hashes, s, s-1, s+1)
			}
			for range 10000 {
				hashes = append(hashes, rand.Uint64())
			}
			for _, h := range hashes {
				in := 0
				for i, s := range starts {
					last := i == n-1
					if h >= s && (last || h < starts[i+1]) {
						in++
						assert.Equal(t, i, b.OfHash(h), "hash %#x", h)
					}
				}
				assert.Equal(t, 1, in, "hash %#x falls in exactly one bucket", h)
			}
			assert.Equal(t, 0, b.OfHash(0))
			assert.Equal(t, n-1, b.OfHash(math.MaxUint64))
		})
	}
}

func TestSelectorMatchesItsBuckets(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	objects := make([]*metav1.PartialObjectMetadata, 300)
	for i := range objects {
		objects[i] = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			UID:       uuid.NewUUID(),
			Namespace: "ns-" + strconv.FormatUint(r.Uint64(), 36),
		}}
	}
	for _, n := range counts {
		b, err := NewBuckets(n)
		require.NoError(t, err)
		sets := [][]int{{0}, {n - 1}, all(n)}
		for range 10 {
			var set []int
			for i := range n {
				if r.IntN(3) == 0 {
					set = append(set, i)
				}
			}
			if len(set) > 0 {
				sets = append(sets, set)
			}
		}
		for _, key := range []string{fxstore.ShardByUID, fxstore.ShardByNamespace} {
			t.Run(fmt.Sprintf("%d buckets by %s", n, key), func(t *testing.T) {
				bucketOf := make([]int, len(objects))
				for i, obj := range objects {
					bucket, err := b.Of(obj, key)
					require.NoError(t, err)
					bucketOf[i] = bucket
				}
				for _, set := range sets {
					sel, err := b.Selector(key, set)
					require.NoError(t, err)
					checkSelector(t, b, key, set, sel)
					inSet := map[int]bool{}
					for _, i := range set {
						inSet[i] = true
					}
					for i, obj := range objects {
						matches, err := sel.Matches(obj)
						require.NoError(t, err)
						if matches != inSet[bucketOf[i]] {
							t.Fatalf("buckets %v: object in bucket %d: Matches = %v", set, bucketOf[i], matches)
						}
					}
				}
			})
		}
	}
}

// checkSelector checks that sel has one range per run of contiguous buckets
// of set, with bounds the API server accepts, and that it selects exactly
// the edge hashes of the buckets in set.
func checkSelector(t *testing.T, b Buckets, key string, set []int, sel sharding.Selector) {
	t.Helper()
	bound := regexp.MustCompile(`^0x[0-9a-f]{16}$`)
	runs := 1
	for i := 1; i < len(set); i++ {
		if set[i] != set[i-1]+1 {
			runs++
		}
	}
	reqs := sel.Requirements()
	require.Len(t, reqs, runs, "one range per run of contiguous buckets")
	for _, req := range reqs {
		assert.Equal(t, key, req.Key)
		assert.Regexp(t, bound, req.Start)
		if req.End != hashSpaceEnd {
			assert.Regexp(t, bound, req.End)
		}
		assert.True(t, sharding.HexLess(req.Start, req.End), "%s < %s", req.Start, req.End)
	}
	// The edges of every bucket, 0 and 2^64-1 among them, evaluated as
	// sharding.Selector.Matches evaluates a hash.
	inSet := map[int]bool{}
	for _, i := range set {
		inSet[i] = true
	}
	starts, _ := bounds(t, b)
	require.True(t, sort.SliceIsSorted(reqs, func(i, j int) bool { return sharding.HexLess(reqs[i].Start, reqs[j].Start) }))
	for _, s := range starts {
		for _, h := range []uint64{s, s - 1} {
			hex := fmt.Sprintf("0x%016x", h)
			// The last range starting at or below hex is the only one
			// that may hold it.
			i := sort.Search(len(reqs), func(i int) bool { return sharding.HexLess(hex, reqs[i].Start) }) - 1
			matches := i >= 0 && sharding.HexLess(hex, reqs[i].End)
			if matches != inSet[b.OfHash(h)] {
				t.Fatalf("buckets %v: hash %s in bucket %d: selected = %v", set, hex, b.OfHash(h), matches)
			}
		}
	}
}

func all(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestSelectorMergesContiguousBuckets(t *testing.T) {
	b, err := NewBuckets(4)
	require.NoError(t, err)
	tests := []struct {
		give []int
		want string
	}{
		{give: []int{0}, want: "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')"},
		{give: []int{3, 0, 1, 3}, want: "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || " +
			"shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"},
		{give: []int{0, 1, 2, 3}, want: "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
	}
	for _, tt := range tests {
		sel, err := b.Selector(fxstore.ShardByUID, tt.give)
		require.NoError(t, err)
		assert.Equal(t, tt.want, sel.String(), "buckets %v", tt.give)
	}
}

func TestSelectorErrors(t *testing.T) {
	b, err := NewBuckets(4)
	require.NoError(t, err)
	tests := []struct {
		name    string
		key     string
		buckets []int
		want    string
	}{
		{name: "no buckets", key: fxstore.ShardByUID, want: "no buckets"},
		{name: "negative", key: fxstore.ShardByUID, buckets: []int{-1, 2}, want: "bucket -1 is out of range: there are 4 buckets, numbered 0 to 3"},
		{name: "beyond", key: fxstore.ShardByUID, buckets: []int{1, 4}, want: "bucket 4 is out of range"},
		{name: "key", key: "metadata.uid", buckets: []int{1}, want: `shard key "metadata.uid" is not supported; use object.metadata.uid or object.metadata.namespace`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.Selector(tt.key, tt.buckets)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err = b.Selector(fxstore.ShardByUID, nil)
	require.ErrorIs(t, err, ErrNoBuckets)
}

func TestOfNeedsAShardKey(t *testing.T) {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID("u")}}
	_, err := Buckets{}.Of(obj, "object.metadata.name")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "use object.metadata.uid or object.metadata.namespace")
}
