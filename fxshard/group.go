package fxshard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Group is a group of replicas as its Leases say at one moment: who holds
// each bucket, and who the members are. It is what `describe --cluster`
// shows; a replica's own view is its Coordinator's.
type Group struct {
	Buckets []BucketLease // one per bucket, in order
	Members []MemberLease // by identity
}

// BucketLease is a bucket's Lease.
type BucketLease struct {
	Bucket int
	// Holder is the replica holding the bucket; "" when none does (given
	// back on a clean stop, or never taken).
	Holder  string
	Renewed time.Time
	// Expired reports that the holder has not renewed it for its
	// LeaseDuration: it stopped, and another replica may take it.
	Expired bool
	// Transitions counts the times the bucket changed hands.
	Transitions int32
}

// MemberLease is a member's Lease and the buckets it holds.
type MemberLease struct {
	Identity string
	// Expired reports that the member has not renewed its Lease for its
	// LeaseDuration, or holds buckets without one (it is stopping, or
	// stopped): it is no live member.
	Expired bool
	Buckets []int
}

// Handovers returns the times a bucket changed hands, over every bucket.
func (g Group) Handovers() int {
	n := 0
	for _, b := range g.Buckets {
		n += int(b.Transitions)
	}
	return n
}

// ReadGroup reads the Leases of cfg's group (cfg.Namespace, cfg.Name,
// cfg.Buckets) through client, as of now.
func ReadGroup(ctx context.Context, client kubernetes.Interface, cfg Config) (Group, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Group{}, err
	}
	leases, err := client.CoordinationV1().Leases(cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{LeaseLabel: cfg.Name}.AsSelector().String(),
	})
	if err != nil {
		return Group{}, fmt.Errorf("fxshard: read the Leases of %s/%s: %w", cfg.Namespace, cfg.Name, err)
	}
	now := time.Now()
	g := Group{Buckets: make([]BucketLease, cfg.Buckets)}
	for b := range g.Buckets {
		g.Buckets[b].Bucket = b
	}
	members := map[string]*MemberLease{}
	bucketPrefix, memberPrefix := cfg.bucketLeasePrefix(), cfg.memberLeasePrefix()
	for i := range leases.Items {
		l := &leases.Items[i]
		holder, renewed, expired := leaseHolder(l, now)
		switch {
		case strings.HasPrefix(l.Name, bucketPrefix):
			b, err := strconv.Atoi(strings.TrimPrefix(l.Name, bucketPrefix))
			if err != nil || b < 0 || b >= cfg.Buckets {
				continue // of another bucket count: not this group's
			}
			g.Buckets[b] = BucketLease{Bucket: b, Holder: holder, Renewed: renewed, Expired: expired, Transitions: ptr.Deref(l.Spec.LeaseTransitions, 0)}
		case strings.HasPrefix(l.Name, memberPrefix) && holder != "":
			members[holder] = &MemberLease{Identity: holder, Expired: expired}
		}
	}
	for _, b := range g.Buckets {
		if b.Holder == "" || b.Expired {
			continue
		}
		m, ok := members[b.Holder]
		if !ok {
			m = &MemberLease{Identity: b.Holder, Expired: true} // its member Lease is gone
			members[b.Holder] = m
		}
		m.Buckets = append(m.Buckets, b.Bucket)
	}
	for _, id := range slices.Sorted(maps.Keys(members)) {
		g.Members = append(g.Members, *members[id])
	}
	return g, nil
}

// leaseHolder returns l's holder, its last renewal, and whether it has
// expired by now.
func leaseHolder(l *coordinationv1.Lease, now time.Time) (holder string, renewed time.Time, expired bool) {
	holder = ptr.Deref(l.Spec.HolderIdentity, "")
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	duration := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
	return holder, renewed, holder != "" && now.Sub(renewed) > duration
}
