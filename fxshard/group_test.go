package fxshard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// ReadGroup reads who holds each bucket and who the members are from the
// group's Leases: expired holders and members are marked, a bucket given
// back has no holder, and the Leases of other groups or bucket counts are
// not the group's.
func TestReadGroup(t *testing.T) {
	now := time.Now()
	lease := func(name, group, holder string, renewed time.Time, transitions int32) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: name, Labels: map[string]string{LeaseLabel: group}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](3600), // margins for a slow -race run
				RenewTime: &metav1.MicroTime{Time: renewed}, LeaseTransitions: ptr.To(transitions),
			},
		}
	}
	client := fake.NewClientset(
		lease("app-bucket-0", "app", "a", now, 2),
		lease("app-bucket-1", "app", "b", now, 0),
		lease("app-bucket-2", "app", "gone", now.Add(-2*time.Hour), 1),
		lease("app-bucket-3", "app", "", now, 3),  // given back
		lease("app-bucket-9", "app", "a", now, 5), // of another bucket count
		lease("app-member-a", "app", "a", now, 0),
		lease("app-member-b", "app", "b", now, 0),
		lease("app-member-gone", "app", "gone", now.Add(-2*time.Hour), 0),
		lease("other-bucket-1", "other", "c", now, 7),
	)
	g, err := ReadGroup(t.Context(), client, Config{Namespace: "ops", Name: "app", Buckets: 4})
	require.NoError(t, err)
	require.Len(t, g.Buckets, 4)
	assert.Equal(t, "a", g.Buckets[0].Holder)
	assert.Equal(t, int32(2), g.Buckets[0].Transitions)
	assert.False(t, g.Buckets[0].Expired)
	assert.True(t, g.Buckets[2].Expired, "not renewed for its LeaseDuration")
	assert.Empty(t, g.Buckets[3].Holder)
	assert.Equal(t, 6, g.Handovers(), "2 + 0 + 1 + 3: this group's buckets only")
	require.Len(t, g.Members, 3)
	assert.Equal(t, "a", g.Members[0].Identity)
	assert.Equal(t, []int{0}, g.Members[0].Buckets)
	assert.Equal(t, []int{1}, g.Members[1].Buckets)
	assert.Equal(t, "gone", g.Members[2].Identity)
	assert.True(t, g.Members[2].Expired)
	assert.Empty(t, g.Members[2].Buckets, "an expired bucket is no one's")

	_, err = ReadGroup(t.Context(), client, Config{Name: "app"})
	require.ErrorContains(t, err, "Config.Namespace is empty", "the Leases' namespace is required")
}
