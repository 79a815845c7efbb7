package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
)

// clusterMembers is how many member control planes BenchmarkClusters
// starts, each about 0.5 GiB; clusterPods how many Pods each holds, the
// same in each: FXKUBE_BENCH_CLUSTER_PODS, 2,000 by default.
const clusterMembers = 3

func clusterPods() int {
	if n, err := strconv.Atoi(os.Getenv("FXKUBE_BENCH_CLUSTER_PODS")); err == nil && n > 0 {
		return n
	}
	return 2000
}

// BenchmarkClusters runs controllers across member clusters that hold the
// same Pods, managedFields stripped:
//
//   - heap per Pod: fxkube's fleet with one member and with three, against
//     one controller-runtime cluster.Cluster per member, which is what
//     multicluster-runtime and Cluster API build;
//   - ready: how long the three members take to be ready, with and without
//     a fourth member no request reaches;
//   - a member joining the two others: from its engagement to its first
//     reconcile, beside its store's sync time;
//   - the same member leaving: how much of the heap it added it gives back.
//
// Each system runs in this process in turn, and is stopped and collected
// before the next. Heap is the bytes live after a GC, less those before.
func BenchmarkClusters(b *testing.B) {
	cps := testenv.Members(b, clusterMembers)
	n := clusterPods()
	members := map[fxcluster.ClusterName]*rest.Config{}
	var names []fxcluster.ClusterName
	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(cps))
	for i, cp := range cps {
		name := fxcluster.ClusterName(fmt.Sprintf("member-%d", i))
		names = append(names, name)
		cfg := rest.CopyConfig(cp.Config)
		cfg.QPS, cfg.Burst = -1, 0
		members[name] = cfg
		wg.Go(func() {
			kube, err := kubernetes.NewForConfig(cfg)
			if err == nil {
				err = (&population{kinds: podObjects.kinds}).ensure(b.Context(), kube, n)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("made %d members hold the same %d Pods in %s", len(cps), n, time.Since(began).Round(time.Millisecond))

	perPod := map[string]float64{}
	for _, sys := range []struct {
		name    string
		members int
		start   func(b *testing.B, members map[fxcluster.ClusterName]*rest.Config) (stop func())
	}{
		{"fxkube/members=1", 1, startFleet},
		{"fxkube/members=3", 3, startFleet},
		{"controller-runtime/members=1", 1, startClusters},
		{"controller-runtime/members=3", 3, startClusters},
	} {
		b.Run("heap/system="+sys.name, func(b *testing.B) {
			some := map[fxcluster.ClusterName]*rest.Config{}
			for _, name := range names[:sys.members] {
				some[name] = members[name]
			}
			var heap int64
			for b.Loop() {
				base := heapAfterGC()
				stop := sys.start(b, some)
				heap = heapAfterGC() - base
				stop()
			}
			perPod[sys.name] = float64(heap) / float64(n*sys.members)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(perPod[sys.name], "heap-B/pod")
		})
	}
	if one, three := perPod["fxkube/members=1"], perPod["fxkube/members=3"]; one > 0 && three > 0 {
		b.Logf("heap per Pod: fxkube %.0f B with one member, %.0f B with three (%.2f×); controller-runtime %.0f B and %.0f B; fxkube ÷ controller-runtime with three: %.2f×",
			one, three, three/one, perPod["controller-runtime/members=1"], perPod["controller-runtime/members=3"], three/perPod["controller-runtime/members=3"])
	}

	b.Run("ready", func(b *testing.B) {
		away := &rest.Config{Host: "https://" + testenv.LoopbackAddr(b), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
		withAway := map[fxcluster.ClusterName]*rest.Config{"away": away}
		for name, cfg := range members {
			withAway[name] = cfg
		}
		var without, with time.Duration
		for b.Loop() {
			// Alternated, and the medians taken: each is under a second,
			// and the machine's noise is of that order.
			var a, w []float64
			for range 7 {
				a = append(a, timeToReady(b, members, names).Seconds())
				w = append(w, timeToReady(b, withAway, names).Seconds())
			}
			without, with = seconds(median(a)), seconds(median(w))
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(without.Seconds(), "ready-s")
		b.ReportMetric(with.Seconds(), "ready-with-unreachable-s")
		b.ReportMetric(with.Seconds()/without.Seconds(), "unreachable-ratio")
	})

	b.Run("join-and-leave", func(b *testing.B) {
		var joined, synced time.Duration
		var given float64
		for b.Loop() {
			joined, synced, given = joinAndLeave(b, members, names)
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(joined.Seconds(), "first-reconcile-s")
		b.ReportMetric(synced.Seconds(), "sync-s")
		b.ReportMetric(100*given, "heap-given-back-%")
	})
}

// heapAfterGC returns the bytes of live objects once collected.
func heapAfterGC() int64 {
	_, alloc := heapNow()
	return alloc
}

// fleet is a running fleet of fxkube's, with a store of Pods in every
// member and a controller that records its first reconcile in each.
type fleet struct {
	fleet  *fxcluster.Fleet
	aware  fxcluster.Aware
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	first map[fxcluster.ClusterName]time.Time
}

func newBenchFleet(b *testing.B) *fleet {
	f := &fleet{first: map[fxcluster.ClusterName]time.Time{}}
	aware := make(chan fxcluster.Aware, 1)
	provider := fxcluster.ProviderFunc(func(ctx context.Context, clusters fxcluster.Aware) error {
		aware <- clusters
		<-ctx.Done()
		return nil
	})
	f.fleet = fxcluster.NewFleet(clientgoscheme.Scheme, zap.NewNop(), fxcluster.Options{
		SyncTimeout: time.Minute, Providers: []fxcluster.Provider{provider},
	})
	pods, err := fxcluster.For[*corev1.Pod](f.fleet, fxstore.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	ctrl, err := fxcluster.NewController("first", pods, fxcluster.Func(func(_ context.Context, req fxcluster.Request) (reconcile.Result, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.first[req.ClusterName]; !ok {
			f.first[req.ClusterName] = time.Now()
		}
		return reconcile.Result{}, nil
	}))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	for _, rn := range []interface{ Start(context.Context) error }{f.fleet, ctrl} {
		f.wg.Go(func() {
			if err := rn.Start(ctx); err != nil {
				b.Error(err)
			}
		})
	}
	f.aware = <-aware
	return f
}

func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
}

// waitReady waits until every member of names is ready.
func (f *fleet) waitReady(b *testing.B, names ...fxcluster.ClusterName) {
	ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	defer cancel()
	err := poll(ctx, "members ready", 5*time.Millisecond, func() (bool, error) {
		ready := map[fxcluster.ClusterName]bool{}
		for _, info := range f.fleet.Clusters() {
			ready[info.Name] = info.State == fxcluster.Ready
		}
		for _, name := range names {
			if !ready[name] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// engage engages the members of names, each with its config in members.
func (f *fleet) engage(b *testing.B, members map[fxcluster.ClusterName]*rest.Config, names ...fxcluster.ClusterName) {
	for _, name := range names {
		if err := f.aware.Engage(b.Context(), name, members[name]); err != nil {
			b.Fatal(err)
		}
	}
}

// startFleet runs a fleet of members until stop. A failure to start
// stops what started.
func startFleet(b *testing.B, members map[fxcluster.ClusterName]*rest.Config) (stop func()) {
	f := newBenchFleet(b)
	started := false
	defer func() {
		if !started {
			f.stop()
		}
	}()
	names := slices.Collect(maps.Keys(members))
	f.engage(b, members, names...)
	f.waitReady(b, names...)
	started = true
	return f.stop
}

// startClusters runs a controller-runtime cluster.Cluster per member, its
// cache holding Pods without managedFields, until stop. A failure to
// start stops what started.
func startClusters(b *testing.B, members map[fxcluster.ClusterName]*rest.Config) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
	}
	started := false
	defer func() {
		if !started {
			stop()
		}
	}()
	for _, cfg := range members {
		c, err := cluster.New(cfg, func(o *cluster.Options) {
			o.Scheme = clientgoscheme.Scheme
			o.Cache = crcache.Options{DefaultTransform: crcache.TransformStripManagedFields()}
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.GetCache().GetInformer(ctx, &corev1.Pod{}); err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			if err := c.Start(ctx); err != nil {
				b.Error(err)
			}
		})
		if !c.GetCache().WaitForCacheSync(ctx) {
			b.Fatal("a controller-runtime cache did not sync")
		}
		var pods corev1.PodList
		if err := c.GetCache().List(ctx, &pods, client.Limit(1)); err != nil {
			b.Fatal(err)
		}
	}
	started = true
	return stop
}

// timeToReady returns how long the members of names take to be ready in a
// fleet engaging every one of members at once.
func timeToReady(b *testing.B, members map[fxcluster.ClusterName]*rest.Config, names []fxcluster.ClusterName) time.Duration {
	f := newBenchFleet(b)
	defer f.stop()
	began := time.Now()
	f.engage(b, members, slices.Collect(maps.Keys(members))...)
	f.waitReady(b, names...)
	return time.Since(began)
}

// joinAndLeave runs a fleet of all members but the last, then engages the
// last: it returns the time from its engagement to its first reconcile,
// its store's sync time, and the share of the heap it added that its
// leaving gave back.
func joinAndLeave(b *testing.B, members map[fxcluster.ClusterName]*rest.Config, names []fxcluster.ClusterName) (joined, synced time.Duration, given float64) {
	f := newBenchFleet(b)
	defer f.stop()
	last := names[len(names)-1]
	f.engage(b, members, names[:len(names)-1]...)
	f.waitReady(b, names[:len(names)-1]...)
	before := heapAfterGC()
	ctx, leave := context.WithCancel(b.Context())
	engaged := time.Now()
	if err := f.aware.Engage(ctx, last, members[last]); err != nil {
		b.Fatal(err)
	}
	wait, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	defer cancel()
	err := poll(wait, "first reconcile", time.Millisecond, func() (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		_, ok := f.first[last]
		return ok, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	f.mu.Lock()
	joined = f.first[last].Sub(engaged)
	f.mu.Unlock()
	for _, info := range f.fleet.Clusters() {
		if info.Name == last && len(info.Stores) > 0 {
			synced = info.Stores[0].Status.SyncDuration
		}
	}
	with := heapAfterGC()
	leave()
	err = poll(wait, "member left", 5*time.Millisecond, func() (bool, error) {
		for _, info := range f.fleet.Clusters() {
			if info.Name == last {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	after := heapAfterGC()
	b.Logf("member %s: first reconcile %s after it was engaged (its store synced in %s); heap %d → %d → %d B",
		last, joined.Round(time.Millisecond), synced.Round(time.Millisecond), before, with, after)
	return joined, synced, float64(with-after) / float64(with-before)
}
