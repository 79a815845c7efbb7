package fxshard

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/fxkube/fxkube/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testenv.WithControlPlane(m))
}

// Short timings, as the package documentation's bracketed figures.
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 250 * time.Millisecond
	// drainTime is how long a test Releasing takes, as in-flight work would.
	drainTime = 50 * time.Millisecond
	// slack absorbs a loaded 2-core machine running the race detector.
	slack = 1500 * time.Millisecond
)

func TestSharesAndRebalancing(t *testing.T) {
	g := newGroup(t)
	a, b, c := g.start("replica-a"), g.start("replica-b"), g.start("replica-c")
	g.waitForShares(30*time.Second, map[*replica]int{a: 6, b: 5, c: 5})
	for _, r := range []*replica{a, b, c} {
		assert.Len(t, r.c.Members(), 3)
	}
	g.checkLeaseHolders()

	d := g.start("replica-d")
	added := time.Now()
	g.waitForShares(30*time.Second, map[*replica]int{a: 4, b: 4, c: 4, d: 4})
	t.Logf("4 replicas hold 4 buckets each %v after the 4th started", time.Since(added).Round(time.Millisecond))
	for _, r := range []*replica{a, b, c} {
		assert.Positive(t, r.c.Handovers().Released, "%s gave buckets back", r.c.Identity())
		assert.Zero(t, r.c.Handovers().Lost, "%s lost no bucket", r.c.Identity())
	}
	g.checkLeaseHolders()

	g.stopAll()
	g.rec.checkNoOverlap(t)
	leases, err := g.kube.CoordinationV1().Leases(g.ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, leases.Items, 16, "only bucket Leases are left once every member stopped")
	for _, l := range leases.Items {
		assert.True(t, strings.HasPrefix(l.Name, "shard-bucket-"), l.Name)
		assert.Empty(t, ptr.Deref(l.Spec.HolderIdentity, ""), "%s is released", l.Name)
		assert.Equal(t, "shard", l.Labels[LeaseLabel])
	}
}

func TestPartitionedReplicaStopsBeforeTakeover(t *testing.T) {
	g := newGroup(t)
	a, b, c := g.start("replica-a"), g.start("replica-b"), g.start("replica-c")
	g.waitForShares(30*time.Second, map[*replica]int{a: 6, b: 5, c: 5})
	// Steady: let the renewals of a round all land.
	time.Sleep(2 * retryPeriod)

	held := b.c.Owned()
	cut := time.Now()
	b.partition.Cut()
	g.waitForShares(leaseDuration+renewDeadline+10*time.Second, map[*replica]int{a: 8, b: 0, c: 8})

	for _, bucket := range held {
		called := g.rec.releasingCalled(b.c.Identity(), bucket, cut)
		require.False(t, called.IsZero(), "bucket %d: Releasing called", bucket)
		after := called.Sub(cut)
		t.Logf("bucket %d: Releasing called %v after the partition", bucket, after.Round(time.Millisecond))
		// Its last renewal started at most a round before the cut.
		assert.Greater(t, after, renewDeadline-retryPeriod-750*time.Millisecond, "bucket %d stopped too early", bucket)
		assert.Less(t, after, renewDeadline+retryPeriod+slack, "bucket %d stopped too late", bucket)
	}
	var takeovers []time.Duration
	for _, bucket := range held {
		taken, _ := g.rec.acquiredAfter(bucket, cut)
		require.False(t, taken.IsZero(), "bucket %d taken over", bucket)
		takeovers = append(takeovers, taken.Sub(cut))
	}
	slices.Sort(takeovers)
	t.Logf("takeover of %d buckets after the partition: %v to %v (LeaseDuration %v, RetryPeriod %v)",
		len(held), takeovers[0].Round(time.Millisecond), takeovers[len(takeovers)-1].Round(time.Millisecond), leaseDuration, retryPeriod)
	// No one may take a bucket before LeaseDuration from a renewal that
	// started at most a round before the cut.
	assert.Greater(t, takeovers[0], leaseDuration-retryPeriod-750*time.Millisecond)
	assert.Less(t, takeovers[len(takeovers)-1], leaseDuration+retryPeriod+slack)
	assert.Equal(t, uint64(len(held)), b.c.Handovers().Lost)
	checkLogged(t, b, "lost bucket", len(held))
	g.rec.checkNoOverlap(t)

	// Healed, it is a member again, and the shares even out once more.
	b.partition.Heal()
	g.waitForShares(30*time.Second, map[*replica]int{a: 6, b: 5, c: 5})
	g.checkLeaseHolders()
	g.stopAll()
	g.rec.checkNoOverlap(t)
}

func TestCleanStopHandsOverAtOnce(t *testing.T) {
	g := newGroup(t)
	a, b, c := g.start("replica-a"), g.start("replica-b"), g.start("replica-c")
	g.waitForShares(30*time.Second, map[*replica]int{a: 6, b: 5, c: 5})

	held := a.c.Owned()
	stop := time.Now()
	a.stop(t)
	stopped := time.Since(stop)
	assert.Less(t, stopped, leaseDuration, "Run returns once the drains have")
	g.waitForShares(leaseDuration, map[*replica]int{b: 8, c: 8})

	var handovers []time.Duration
	for _, bucket := range held {
		taken, _ := g.rec.acquiredAfter(bucket, stop)
		require.False(t, taken.IsZero(), "bucket %d taken over", bucket)
		handovers = append(handovers, taken.Sub(stop))
	}
	slices.Sort(handovers)
	t.Logf("clean stop: Run returned after %v; %d buckets handed over in %v to %v (RetryPeriod %v, LeaseDuration %v)",
		stopped.Round(time.Millisecond), len(held), handovers[0].Round(time.Millisecond),
		handovers[len(handovers)-1].Round(time.Millisecond), retryPeriod, leaseDuration)
	// Handed over, not left to expire.
	assert.Less(t, handovers[len(handovers)-1], leaseDuration-renewDeadline)
	h := a.c.Handovers()
	assert.Equal(t, Handovers{Acquired: h.Acquired, Released: h.Acquired}, h, "every bucket acquired was released")
	checkLogged(t, a, "acquired bucket", int(h.Acquired))
	checkLogged(t, a, "releasing bucket", int(h.Released))
	checkLogged(t, a, "released bucket", int(h.Released))

	_, err := g.kube.CoordinationV1().Leases(g.ns).Get(t.Context(), Config{Name: "shard", Identity: a.c.Identity()}.memberLeaseName(), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the member Lease is deleted: %v", err)
	g.stopAll()
	g.rec.checkNoOverlap(t)
}

func TestDeletedBucketLeaseIsFenced(t *testing.T) {
	g := newGroup(t)
	a, b := g.start("replica-a"), g.start("replica-b")
	g.waitForShares(30*time.Second, map[*replica]int{a: 8, b: 8})

	bucket := b.c.Owned()[0]
	deleted := time.Now()
	err := g.kube.CoordinationV1().Leases(g.ns).Delete(t.Context(), fmt.Sprintf("shard-bucket-%d", bucket), metav1.DeleteOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !b.c.Owns(bucket) }, retryPeriod+slack, 10*time.Millisecond,
		"the holder stops the bucket at its next renewal")
	t.Logf("bucket %d stopped %v after its Lease was deleted", bucket, time.Since(deleted).Round(time.Millisecond))
	assert.Equal(t, uint64(1), b.c.Handovers().Lost)

	// The other saw the Lease go while b held it, so it would wait
	// LeaseDuration; b, which drained it, takes it back at once.
	g.waitForShares(leaseDuration, map[*replica]int{a: 8, b: 8})
	taken, by := g.rec.acquiredAfter(bucket, deleted)
	t.Logf("bucket %d taken again by %s %v after its Lease was deleted", bucket, by, taken.Sub(deleted).Round(time.Millisecond))
	assert.Equal(t, b.c.Identity(), by)
	g.stopAll()
	g.rec.checkNoOverlap(t)
}

func TestFairShare(t *testing.T) {
	tests := []struct {
		buckets, members int
		want             []int
	}{
		{buckets: 16, members: 1, want: []int{16}},
		{buckets: 16, members: 3, want: []int{6, 5, 5}},
		{buckets: 16, members: 4, want: []int{4, 4, 4, 4}},
		{buckets: 16, members: 5, want: []int{4, 3, 3, 3, 3}},
		{buckets: 2, members: 3, want: []int{1, 1, 0}},
	}
	for _, tt := range tests {
		var got []int
		for k := range tt.members {
			got = append(got, fairShare(tt.buckets, tt.members, k))
		}
		assert.Equal(t, tt.want, got, "%d buckets, %d members", tt.buckets, tt.members)
	}
}

// A bucket Lease seen deleted while held waits LeaseDuration from the
// deletion, as its holder stops only at its next renewal; a member Lease
// deleted is a member gone.
func TestDeletedLeases(t *testing.T) {
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	require.NoError(t, err)
	c, err := New(kube, HandlerFuncs{}, Config{Namespace: "default", Name: "shard", Identity: "replica-a"})
	require.NoError(t, err)
	holder := "replica-b"
	for _, name := range []string{"shard-bucket-3", "shard-member-replica-b"} {
		c.observeLease(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &metav1.MicroTime{Time: time.Now()}},
		})
	}
	c.mu.Lock()
	assert.True(t, c.takeable(2, time.Now()), "a bucket without a Lease is free")
	assert.False(t, c.takeable(3, time.Now()), "a bucket just renewed is held")
	live, _ := c.liveMembers(time.Now())
	assert.Equal(t, []string{"replica-a", "replica-b"}, live)
	c.mu.Unlock()

	time.Sleep(10 * time.Millisecond)
	c.forget("shard-bucket-3")
	c.forget("shard-member-replica-b")
	deleted := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.False(t, c.takeable(3, deleted.Add(defaultLeaseDuration-5*time.Millisecond)), "LeaseDuration counts from the deletion")
	assert.True(t, c.takeable(3, deleted.Add(defaultLeaseDuration+time.Millisecond)))
	live, _ = c.liveMembers(deleted)
	assert.Equal(t, []string{"replica-a"}, live)
}

func TestRunErrors(t *testing.T) {
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	c, err := New(kube, HandlerFuncs{}, Config{Namespace: "no-such-namespace", Name: "shard", Identity: "replica-a"})
	require.NoError(t, err)
	err = c.Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fxshard: join no-such-namespace/shard: write member Lease shard-member-replica-a: ")
	assert.Contains(t, err.Error(), `namespaces "no-such-namespace" not found`)

	err = c.Run(t.Context())
	require.EqualError(t, err, "fxshard: Coordinator.Run called twice; make a new Coordinator for each run")
}

// checkLogged checks that r logged msg n times, each with the bucket and
// r's identity.
func checkLogged(t *testing.T, r *replica, msg string, n int) {
	t.Helper()
	entries := r.logs.FilterMessage(msg).All()
	assert.Len(t, entries, n, "%q logged once a bucket", msg)
	for _, e := range entries {
		fields := e.ContextMap()
		assert.Contains(t, fields, "bucket", msg)
		assert.Equal(t, r.c.Identity(), fields["identity"], msg)
		assert.Equal(t, zap.InfoLevel, e.Level, msg)
	}
}

// group is a group of replicas in a namespace of their own, each with its own
// client, recording what their Handlers are called with.
type group struct {
	t        *testing.T
	ns       string
	kube     kubernetes.Interface
	rec      *recorder
	replicas []*replica
}

type replica struct {
	c         *Coordinator
	logs      *observer.ObservedLogs
	partition *testenv.Partition
	cancel    context.CancelFunc
	done      chan error
}

func newGroup(t *testing.T) *group {
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	g := &group{t: t, ns: testenv.Namespace(t, kube, "fxshard", testenv.DeleteAtEnd), kube: kube, rec: &recorder{t: t}}
	t.Cleanup(g.stopAll)
	return g
}

func (g *group) start(identity string) *replica {
	t := g.t
	cfg := testenv.Config(t)
	cfg.QPS = -1 // 17 Leases every 250ms is above client-go's default limit
	r := &replica{partition: &testenv.Partition{}, done: make(chan error, 1)}
	cfg.Wrap(r.partition.Wrap)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	observed, logs := observer.New(zap.InfoLevel)
	r.logs = logs
	r.c, err = New(kube, g.rec.handler(identity, func(b int) bool { return r.c.Owns(b) }), Config{
		Namespace:     g.ns,
		Name:          "shard",
		Identity:      identity,
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   retryPeriod,
		Logger:        zap.New(zapcore.NewTee(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Core(), observed)),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.c.Run(ctx) }()
	g.replicas = append(g.replicas, r)
	return r
}

// stop ends the replica's Run, and waits for it to return.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		assert.NoError(t, err)
	case <-time.After(leaseDuration + renewDeadline + slack):
		t.Errorf("%s: Run did not return within LeaseDuration + RenewDeadline of its stop", r.c.Identity())
		assert.NoError(t, <-r.done)
	}
}

func (g *group) stopAll() {
	var wg sync.WaitGroup
	for _, r := range g.replicas {
		wg.Go(func() { r.stop(g.t) })
	}
	wg.Wait()
}

// waitForShares waits until each replica owns as many buckets as want says,
// all 16 between them.
func (g *group) waitForShares(timeout time.Duration, want map[*replica]int) {
	g.t.Helper()
	start := time.Now()
	counts := func() (map[string]int, map[string]int) {
		got, wanted := map[string]int{}, map[string]int{}
		owner := map[int]string{}
		for r, n := range want {
			id := r.c.Identity()
			wanted[id] = n
			for _, b := range r.c.Owned() {
				got[id]++
				if other, ok := owner[b]; ok {
					g.t.Errorf("bucket %d owned by %s and %s at once", b, other, id)
				}
				owner[b] = id
			}
		}
		return got, wanted
	}
	if !assert.Eventually(g.t, func() bool {
		got, wanted := counts()
		for id, n := range wanted {
			if got[id] != n {
				return false
			}
		}
		return true
	}, timeout, 50*time.Millisecond) {
		got, wanted := counts()
		g.t.Fatalf("shares %v after %v, want %v", got, timeout, wanted)
	}
	g.t.Logf("shares reached in %v", time.Since(start).Round(time.Millisecond))
}

// checkLeaseHolders checks that each bucket's Lease names the replica that
// owns it.
func (g *group) checkLeaseHolders() {
	g.t.Helper()
	for _, r := range g.replicas {
		if r.cancel == nil {
			continue
		}
		for _, b := range r.c.Owned() {
			lease, err := g.kube.CoordinationV1().Leases(g.ns).Get(g.t.Context(), fmt.Sprintf("shard-bucket-%d", b), metav1.GetOptions{})
			require.NoError(g.t, err)
			assert.Equal(g.t, r.c.Identity(), ptr.Deref(lease.Spec.HolderIdentity, ""), "holder of bucket %d", b)
		}
	}
}

// recorder records when each replica held each bucket: from Acquired until
// its Releasing returned.
type recorder struct {
	t     *testing.T
	mu    sync.Mutex
	holds []*hold
}

type hold struct {
	replica   string
	bucket    int
	acquired  time.Time
	releasing time.Time // when Releasing was called
	released  time.Time // when it returned; zero while held
}

func (r *recorder) handler(replica string, owns func(int) bool) Handler {
	open := func(bucket int) *hold {
		for _, h := range r.holds {
			if h.replica == replica && h.bucket == bucket && h.released.IsZero() {
				return h
			}
		}
		return nil
	}
	return HandlerFuncs{
		AcquiredFunc: func(bucket int) {
			now := time.Now()
			assert.True(r.t, owns(bucket), "%s: Owns(%d) in Acquired", replica, bucket)
			r.mu.Lock()
			defer r.mu.Unlock()
			if open(bucket) != nil {
				r.t.Errorf("%s: Acquired(%d) while holding it", replica, bucket)
			}
			r.holds = append(r.holds, &hold{replica: replica, bucket: bucket, acquired: now})
		},
		ReleasingFunc: func(ctx context.Context, bucket int) {
			called := time.Now()
			assert.False(r.t, owns(bucket), "%s: Owns(%d) in Releasing", replica, bucket)
			deadline, ok := ctx.Deadline()
			assert.True(r.t, ok, "Releasing's context has a deadline")
			assert.Greater(r.t, deadline.Sub(called), time.Duration(0), "Releasing(%d) has time to drain", bucket)
			select {
			case <-time.After(drainTime):
			case <-ctx.Done():
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			h := open(bucket)
			if h == nil {
				r.t.Errorf("%s: Releasing(%d) without Acquired", replica, bucket)
				return
			}
			h.releasing, h.released = called, time.Now()
		},
	}
}

// checkNoOverlap checks that no two holds of a bucket overlap: each replica
// took a bucket only after the previous holder's Releasing returned.
func (r *recorder) checkNoOverlap(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	byBucket := map[int][]*hold{}
	for _, h := range r.holds {
		byBucket[h.bucket] = append(byBucket[h.bucket], h)
	}
	handovers := 0
	for b, holds := range byBucket {
		sort.Slice(holds, func(i, j int) bool { return holds[i].acquired.Before(holds[j].acquired) })
		for i := 1; i < len(holds); i++ {
			prev, next := holds[i-1], holds[i]
			if prev.released.IsZero() || next.acquired.Before(prev.released) {
				t.Errorf("bucket %d: %s acquired it at %v while %s held it (released at %v)",
					b, next.replica, next.acquired, prev.replica, prev.released)
			}
			handovers++
		}
	}
	t.Logf("%d holds, %d hand-overs, none overlapping", len(r.holds), handovers)
}

// releasingCalled returns when replica's Releasing of bucket was first
// called after since.
func (r *recorder) releasingCalled(replica string, bucket int, since time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.holds {
		if h.replica == replica && h.bucket == bucket && h.releasing.After(since) {
			return h.releasing
		}
	}
	return time.Time{}
}

// acquiredAfter returns when bucket was first acquired after since, and by
// which replica.
func (r *recorder) acquiredAfter(bucket int, since time.Time) (time.Time, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.holds {
		if h.bucket == bucket && h.acquired.After(since) {
			return h.acquired, h.replica
		}
	}
	return time.Time{}, ""
}
