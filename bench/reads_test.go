package bench

import (
	"context"
	"runtime"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/storecache"
)

// readers are each system's cache of the workload's ConfigMaps and
// Deployments (every one of them), in this process.
type readers struct {
	configMaps  *fxstore.Store[*corev1.ConfigMap]
	deployments *fxstore.Store[*appsv1.Deployment]

	cr client.Client // what a manager's GetClient returns: reads from the cache
	// hosted is what a hosted operator's mgr.GetClient returns: reads from
	// an fxstore.Cache over the registry with operatorCache's options, whose
	// Secret store has the operators' field index (as cr's cache does).
	hosted client.Client

	configMapLister  corelisters.ConfigMapLister
	deploymentLister appslisters.DeploymentLister
}

// startReaders starts the three caches, and the hosted operators' client
// over fxkube's, and waits for them to sync; they
// stop when b ends. fxkube's stores are started directly with
// Registry.Start and WaitForSync, without fx: reading a store costs the same
// however it was started.
func startReaders(b *testing.B) *readers {
	b.Helper()
	cfg := adminConfig(b)
	bg := newBackground(b)
	ctx, fatal := bg.ctx, mustSucceed(b)
	r := &readers{}
	var err error

	registry := fxstore.NewRegistry(clientgoscheme.Scheme)
	r.configMaps, err = fxstore.For[*corev1.ConfigMap](registry, fxstore.Spec{LabelSelector: everything})
	fatal(err)
	r.deployments, err = fxstore.For[*appsv1.Deployment](registry, fxstore.Spec{LabelSelector: everything})
	fatal(err)
	conn, err := connection.New(cfg, clientgoscheme.Scheme)
	fatal(err)
	hosted, err := storecache.New(registry, conn.Mapper, operatorCache(), storecache.WithConsumer("reads"))
	fatal(err)
	fatal(hosted.IndexField(ctx, &corev1.Secret{}, secretConfigMapKey, secretConfigMap))
	fatal(registry.Start(ctx, apiserver.NewSource(conn.Client)))
	bg.onStop(registry.Stop)
	fatal(registry.WaitForSync(ctx))
	r.hosted, err = client.New(cfg, client.Options{
		Scheme: clientgoscheme.Scheme, HTTPClient: conn.HTTPClient, Mapper: conn.Mapper,
		Cache: &client.CacheOptions{Reader: hosted},
	})
	fatal(err)

	crCache, err := cache.New(cfg, cache.Options{
		Scheme:               clientgoscheme.Scheme,
		DefaultLabelSelector: mustSelector(everything),
		DefaultTransform:     cache.TransformStripManagedFields(),
	})
	fatal(err)
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}} {
		_, err := crCache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		fatal(err)
	}
	fatal(crCache.IndexField(ctx, &corev1.Secret{}, secretConfigMapKey, secretConfigMap))
	bg.wg.Go(func() { _ = crCache.Start(ctx) })
	if !crCache.WaitForCacheSync(ctx) {
		b.Fatal("controller-runtime's cache did not sync")
	}
	r.cr, err = client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme, Cache: &client.CacheOptions{Reader: crCache}})
	fatal(err)

	kube, err := kubernetes.NewForConfig(protobuf(cfg))
	fatal(err)
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = everything
	}))
	r.configMapLister = factory.Core().V1().ConfigMaps().Lister()
	r.deploymentLister = factory.Apps().V1().Deployments().Lister()
	factory.Start(ctx.Done())
	bg.onStop(factory.Shutdown)
	factory.WaitForCacheSync(ctx.Done())
	return r
}

// background runs what a reads benchmark's caches need until b ends.
type background struct {
	ctx   context.Context
	wg    sync.WaitGroup // goroutines running until ctx ends
	stops []func()       // each waits for what ctx ran to end
}

func newBackground(b *testing.B) *background {
	ctx, cancel := context.WithCancel(context.Background())
	bg := &background{ctx: ctx}
	b.Cleanup(func() {
		cancel()
		for _, stop := range bg.stops {
			stop()
		}
		bg.wg.Wait()
	})
	return bg
}

func (bg *background) onStop(stop func()) { bg.stops = append(bg.stops, stop) }

// mustSucceed returns a function that ends b on an error.
func mustSucceed(b *testing.B) func(error) {
	return func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchRead runs read in a benchmark loop and records its time and
// allocations per call, counted as testing does.
func benchRead(b *testing.B, rec *recorder, n int, sys, op string, read func(i int) error) {
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	i := 0
	for b.Loop() {
		if err := read(i); err != nil {
			b.Fatal(err)
		}
		i++
	}
	runtime.ReadMemStats(&after)
	rec.record(n, sys, op+" ns/op", float64(b.Elapsed().Nanoseconds())/float64(b.N))
	rec.record(n, sys, op+" allocs/op", float64((after.Mallocs-before.Mallocs)/uint64(b.N)))
}
