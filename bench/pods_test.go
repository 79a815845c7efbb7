package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	pods "github.com/fxkube/fxkube/internal/workload"
)

// BenchmarkPods' workloads hold objects that repeat much of what they
// carry, as a cluster's do:
//
//   - the Pods of 100 Deployments (internal/workload), at 10 and at 100
//     replicas, each with the status a kubelet gives it;
//   - Certificates, a typed custom kind (certificate_test.go);
//   - the suite's ConfigMaps, Secrets and Deployments, which repeat little.
//
// Each workload is one store per kind and one controller of the first
// kind, which reads the object it reconciles from its system's cache.

// podDeployments is how many Deployments the Pods belong to; Deployment
// d lives in namespace namespaceOf(d).
const podDeployments = 100

var podOwners = func() []*appsv1.Deployment {
	out := make([]*appsv1.Deployment, podDeployments)
	for d := range out {
		out[d] = pods.Deployment(namespaceOf(d), d, 100)
	}
	return out
}()

// Pod i is replica i/podDeployments of Deployment i%podDeployments, so
// the first 1,000 Pods are those of 10 replicas each and growing the
// population to 10,000 adds the other 90.
func newPod(i int) *corev1.Pod {
	pod := pods.Pod(podOwners[i%podDeployments], i/podDeployments)
	// The API server sets these.
	pod.UID, pod.ResourceVersion, pod.CreationTimestamp = "", "", metav1.Time{}
	return pod
}

// podVersion is the version a Pod carries: one more than its first
// container's restarts. A burst restarts that container.
func podVersion(pod *corev1.Pod) int32 {
	if len(pod.Status.ContainerStatuses) == 0 {
		return -1
	}
	return 1 + pod.Status.ContainerStatuses[0].RestartCount
}

// restarted returns a merge patch of Pod i's status as a kubelet leaves
// it once the Pod's first container restarted, for the version-th time
// but one (workload.Restart). The rest of the Pod repeats what it was.
func restarted(i int, version int32) ([]byte, error) {
	status := newPod(i).Status
	pods.Restart(&status, version-1)
	return json.Marshal(map[string]any{"status": map[string]any{
		"conditions": status.Conditions, "containerStatuses": status.ContainerStatuses}})
}

func podKey(i int) client.ObjectKey {
	return client.ObjectKey{Namespace: namespaceOf(i % podDeployments), Name: newPod(i).Name}
}

// podIndex returns the index of the Pod named as workload.Pod names
// them ("service-007-<hash>-0002a"), or -1.
func podIndex(key client.ObjectKey) int {
	rest, ok := strings.CutPrefix(key.Name, "service-")
	if !ok || len(rest) < 3 {
		return -1
	}
	d, err1 := strconv.Atoi(rest[:3])
	r, err2 := strconv.ParseInt(rest[strings.LastIndexByte(rest, '-')+1:], 16, 32)
	if err1 != nil || err2 != nil {
		return -1
	}
	return d + podDeployments*int(r)
}

// podObjects creates each Pod, then sets the status a kubelet would
// through the status subresource: there is no kubelet.
var podObjects = population{kinds: []objectKind{{
	create: func(ctx context.Context, kube kubernetes.Interface, i int) error {
		want := newPod(i)
		pods := kube.CoreV1().Pods(want.Namespace)
		pod, err := pods.Create(ctx, want.DeepCopy(), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			pod, err = pods.Get(ctx, want.Name, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		pod.Status = want.Status
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	},
	delete: func(ctx context.Context, kube kubernetes.Interface, i int) error {
		k := podKey(i)
		err := kube.CoreV1().Pods(k.Namespace).Delete(ctx, k.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	},
}}}

var certificateObjects = population{kinds: []objectKind{certificateKind}}

// storeKind is a kind a workload keeps in a store, as each system asks
// for it, and how the benchmark updates its objects.
type storeKind struct {
	name     string // the store's, in counts
	resource string // as the API server's metrics name it
	selector string // a label selector of the workload's objects
	object   func() client.Object
	list     func() client.ObjectList
	fxkube   func(r *fxstore.Registry, spec fxstore.Spec, opts ...fxstore.Option) (kindStore, error)
	key      func(i int) client.ObjectKey
	index    func(key client.ObjectKey) int // of the object; -1 if none
	// make returns object i as created; the first kind's only.
	make func(i int) client.Object
	// listSelector selects what the List read lists in namespace 3.
	listSelector string
	// update sets object i's version.
	update func(ctx context.Context, kube kubernetes.Interface, i int, version int32) error
}

// kindStore is an fxkube store of a kind, read as client.Objects.
type kindStore interface {
	store
	fxcontroller.Primary
	get(namespace, name string) (client.Object, error)
	count(opts ...client.ListOption) (int, error)
}

type typedStore[T client.Object] struct{ *fxstore.Store[T] }

func (s typedStore[T]) get(namespace, name string) (client.Object, error) {
	return s.Get(namespace, name)
}

func (s typedStore[T]) count(opts ...client.ListOption) (int, error) {
	l, err := s.List(opts...)
	return len(l), err
}

func kindStoreOf[T client.Object](r *fxstore.Registry, spec fxstore.Spec, opts ...fxstore.Option) (kindStore, error) {
	s, err := fxstore.For[T](r, spec, opts...)
	if err != nil {
		return nil, err
	}
	return typedStore[T]{s}, nil
}

// annotate returns a merge patch setting an object's version.
func annotate(version int32) []byte {
	return fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, versionAnnotation, version)
}

var (
	podsKind = storeKind{
		name: "pods", resource: "pods", selector: "app.kubernetes.io/part-of=shop",
		object: func() client.Object { return &corev1.Pod{} },
		list:   func() client.ObjectList { return &corev1.PodList{} },
		fxkube: kindStoreOf[*corev1.Pod],
		key:    podKey, index: podIndex,
		make:         func(i int) client.Object { return newPod(i) },
		listSelector: "app.kubernetes.io/name=" + podOwners[3].Name,
		update: func(ctx context.Context, kube kubernetes.Interface, i int, version int32) error {
			patch, err := restarted(i, version)
			if err != nil {
				return err
			}
			k := podKey(i)
			_, err = kube.CoreV1().Pods(k.Namespace).Patch(ctx, k.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
			return err
		},
	}
	certificatesKind = storeKind{
		name: "certificates", resource: "certificates", selector: everything,
		object: func() client.Object { return &Certificate{} },
		list:   func() client.ObjectList { return &CertificateList{} },
		fxkube: kindStoreOf[*Certificate],
		key:    objectKey, index: objectIndex,
		make:         func(i int) client.Object { return newCertificate(i) },
		listSelector: "team=" + teamOf(3),
		update: func(ctx context.Context, kube kubernetes.Interface, i int, version int32) error {
			return kube.Discovery().RESTClient().Patch(types.MergePatchType).
				AbsPath(certificatesPath(namespaceOf(i)), nameOf(i)).Body(annotate(version)).Do(ctx).Error()
		},
	}
	configMapStore = storeKind{
		name: "configmaps", resource: "configmaps", selector: everything,
		object: func() client.Object { return &corev1.ConfigMap{} },
		list:   configMapList,
		fxkube: kindStoreOf[*corev1.ConfigMap],
		key:    objectKey, index: objectIndex,
		make:         func(i int) client.Object { return newConfigMap(i) },
		listSelector: "tier=front",
		update: func(ctx context.Context, kube kubernetes.Interface, i int, version int32) error {
			_, err := kube.CoreV1().ConfigMaps(namespaceOf(i)).Patch(ctx, nameOf(i), types.MergePatchType, dataVersion(version), metav1.PatchOptions{})
			return err
		},
	}
	secretStore = storeKind{
		name: "secrets", resource: "secrets", selector: everything,
		object: func() client.Object { return &corev1.Secret{} },
		list:   secretList,
		fxkube: kindStoreOf[*corev1.Secret],
		key:    objectKey, index: objectIndex,
	}
	deploymentStore = storeKind{
		name: "deployments", resource: "deployments", selector: everything,
		object: func() client.Object { return &appsv1.Deployment{} },
		list:   func() client.ObjectList { return &appsv1.DeploymentList{} },
		fxkube: kindStoreOf[*appsv1.Deployment],
		key:    objectKey, index: objectIndex,
	}
)

func objectKey(i int) client.ObjectKey {
	return client.ObjectKey{Namespace: namespaceOf(i), Name: nameOf(i)}
}

func objectIndex(key client.ObjectKey) int { return indexOf(key.Name) }

// kindsWorkload is one of BenchmarkPods' workloads: objects of each of
// its kinds, all in one store per kind, and a controller of the first.
type kindsWorkload struct {
	name    string // in childParams and results
	title   string
	kinds   []*storeKind
	objects int // of each kind
	// updates are how many objects of the first kind the benchmark
	// updates while a child receives: half a second to a few seconds of CPU.
	// A burst of 1,000 ConfigMaps allocates less than one collection's
	// worth, and its CPU moved by ±15% between runs; 10,000 by ±6%.
	// A Pod event costs two to three times a ConfigMap's.
	updates int
	made    *population
}

var kindsWorkloads = []kindsWorkload{
	{"pods-10", "Pods of 100 Deployments × 10 replicas", []*storeKind{&podsKind}, 1_000, 1_000, &podObjects},
	{"pods-100", "Pods of 100 Deployments × 100 replicas", []*storeKind{&podsKind}, 10_000, 1_000, &podObjects},
	{"certificates", "Certificates, a typed custom kind", []*storeKind{&certificatesKind}, 5_000, 5_000, &certificateObjects},
	{"objects", "the suite's ConfigMaps, Secrets and Deployments", []*storeKind{&configMapStore, &secretStore, &deploymentStore}, 10_000, 10_000, &objects},
}

// selectingNothing returns w with stores that select no object: run on
// it, a system takes the heap it takes whatever its stores hold.
func (w kindsWorkload) selectingNothing() kindsWorkload {
	kinds := make([]*storeKind, len(w.kinds))
	for i, k := range w.kinds {
		none := *k
		none.selector = "bench.fxkube.io/none"
		kinds[i] = &none
	}
	w.kinds = kinds
	return w
}

// heapAboveEmpty returns the mean heap the system took with stores that
// hold nothing (MiB), and the mean heap per object its runs took above
// that (KiB): what the objects cost, without what the system costs
// whatever it holds. Run i and empty i ran back to back.
func heapAboveEmpty(runs, empties []*childResult) (emptyMiB, perObjectKiB float64) {
	for i, r := range runs {
		emptyMiB += float64(empties[i].HeapInuse) / (1 << 20)
		perObjectKiB += float64(r.HeapInuse-empties[i].HeapInuse) / 1024 / float64(max(r.held(), 1))
	}
	n := float64(len(runs))
	return emptyMiB / n, perObjectKiB / n
}

// fxkubeUnshared is fxkube with fxstore.WithoutSharing() on every store.
const fxkubeUnshared = "fxkube-unshared"

// fxkubeBytes is fxkube with fxstore.HeldAsBytes() on every store.
const fxkubeBytes = "fxkube-bytes"

// kindsSystems run the kinds workloads, in table order.
var kindsSystems = []string{fxkube, fxkubeUnshared, fxkubeBytes, controllerRuntime, plainInformers}

func kindsWorkloadNamed(name string) (kindsWorkload, bool) {
	for _, w := range kindsWorkloads {
		if w.name == name {
			return w, true
		}
	}
	return kindsWorkload{}, false
}

func (w kindsWorkload) workload() workload {
	resources := make([]string, len(w.kinds))
	for i, k := range w.kinds {
		resources[i] = k.resource
	}
	return workload{
		controllers: []module{{w.kinds[0].name, all}},
		stores: func(n int) map[string]int {
			want := make(map[string]int, len(w.kinds))
			for _, k := range w.kinds {
				want[k.name] = n
			}
			return want
		},
		systems: map[string]func(*rest.Config, *harness) (system, error){
			fxkube:            w.newFxkube(),
			fxkubeUnshared:    w.newFxkube(fxstore.WithoutSharing()),
			fxkubeBytes:       w.newFxkube(fxstore.HeldAsBytes()),
			controllerRuntime: w.newControllerRuntime,
			plainInformers:    w.newInformers,
		},
		resources: resources,
	}
}

// benchScheme is client-go's types and Certificates.
func benchScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, addCertificates(scheme)
}

// newFxkube is the workload as an fxkube app whose stores take opts.
func (w kindsWorkload) newFxkube(opts ...fxstore.Option) func(*rest.Config, *harness) (system, error) {
	return func(cfg *rest.Config, h *harness) (system, error) {
		return newFxkubeApp(cfg, func(stores map[string]store) []fx.Option {
			return []fx.Option{fxstore.AddToScheme(addCertificates), fx.Module(w.name, fxcontroller.Provide(
				func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
					var primary kindStore
					for i, k := range w.kinds {
						s, err := k.fxkube(r, fxstore.Spec{LabelSelector: k.selector}, opts...)
						if err != nil {
							return nil, err
						}
						stores[k.name] = s
						if i == 0 {
							primary = s
						}
					}
					k, t := w.kinds[0], h.trackers[w.kinds[0].name]
					return fxcontroller.New(k.name, primary, reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
						obj, err := primary.get(req.Namespace, req.Name)
						if err != nil {
							return reconcile.Result{}, client.IgnoreNotFound(err)
						}
						t.reconciled(k.index(req.NamespacedName), versionOf(obj))
						return reconcile.Result{}, nil
					}))
				}))}
		})
	}
}

// newControllerRuntime is the workload on a manager whose cache strips
// managedFields; its reconciler reads through the manager's client, which
// deep-copies.
func (w kindsWorkload) newControllerRuntime(cfg *rest.Config, h *harness) (system, error) {
	scheme, err := benchScheme()
	if err != nil {
		return nil, err
	}
	byObject := make(map[client.Object]crcache.ByObject, len(w.kinds))
	for _, k := range w.kinds {
		byObject[k.object()] = crcache.ByObject{Label: mustSelector(k.selector)}
	}
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  crcache.Options{DefaultTransform: crcache.TransformStripManagedFields(), ByObject: byObject},
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	s := &crSystem{mgrs: []manager.Manager{mgr}, readers: make(map[string]crReader)}
	for _, k := range w.kinds {
		if err := s.inform(k.name, mgr.GetCache(), k.object(), k.list); err != nil {
			return nil, err
		}
	}
	k, t, c := w.kinds[0], h.trackers[w.kinds[0].name], mgr.GetClient()
	err = builder.ControllerManagedBy(mgr).Named(k.name).For(k.object()).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			obj := k.object()
			if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			t.reconciled(k.index(req.NamespacedName), versionOf(obj))
			return reconcile.Result{}, nil
		}))
	if err != nil {
		return nil, fmt.Errorf("controller %s: %w", k.name, err)
	}
	return s, nil
}

// kindInformers is the workload on plain client-go informers, one per
// kind, listing and watching through a controller-runtime client
// (protobuf for built-in kinds) and stripping managedFields as the other
// systems do; the controller has the shape of k8s.io/sample-controller.
type kindInformers struct {
	stores     map[string]cache.SharedIndexInformer
	primary    cache.SharedIndexInformer
	controller *plainController

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (w kindsWorkload) newInformers(cfg *rest.Config, h *harness) (system, error) {
	scheme, err := benchScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	s := &kindInformers{stores: make(map[string]cache.SharedIndexInformer)}
	for i, k := range w.kinds {
		inf, err := newKindInformer(c, k)
		if err != nil {
			return nil, err
		}
		s.stores[k.name] = inf
		if i == 0 {
			s.primary = inf
		}
	}
	k, t := w.kinds[0], h.trackers[w.kinds[0].name]
	s.controller = newPlainController(h, k.name, func(key cache.ObjectName) {
		if obj, ok, err := s.primary.GetIndexer().GetByKey(key.String()); err == nil && ok {
			t.reconciled(k.index(client.ObjectKey{Namespace: key.Namespace, Name: key.Name}), versionOf(obj.(client.Object)))
		}
	})
	if err := s.controller.watch(s.primary); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *kindInformers) start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	for _, inf := range s.stores {
		s.wg.Go(func() { inf.RunWithContext(ctx) })
	}
	s.wg.Go(func() {
		if cache.WaitForCacheSync(ctx.Done(), s.primary.HasSynced) {
			s.controller.run(ctx)
		}
	})
}

func (s *kindInformers) synced() (bool, error) { return allSynced(maps.Values(s.stores)), nil }

func (s *kindInformers) counts() (map[string]int, error) { return countsOf(s.stores), nil }

func (s *kindInformers) informers() int { return len(s.stores) }

func (s *kindInformers) details(context.Context) (map[string]time.Duration, error) { return nil, nil }

func (s *kindInformers) stop(ctx context.Context) error {
	if s.cancel != nil {
		s.cancel()
	}
	s.controller.queue.ShutDown()
	return shutDownWithin(ctx, s.wg.Wait)
}

// newKindInformer is a plain informer of k's objects, listing and
// watching through c, stripping managedFields.
func newKindInformer(c client.WithWatch, k *storeKind) (cache.SharedIndexInformer, error) {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = k.selector
			l := k.list()
			return l, c.List(ctx, l, &client.ListOptions{Raw: &o})
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = k.selector
			return c.Watch(ctx, k.list(), &client.ListOptions{Raw: &o})
		},
	}
	inf := cache.NewSharedIndexInformer(lw, k.object(), 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return inf, inf.SetTransform(crcache.TransformStripManagedFields())
}

// kindReadOps are the reads BenchmarkPods measures: one object, and the
// objects of one namespace with a label (listed).
var kindReadOps = []struct {
	name  string
	label func(w kindsWorkload) string
	get   bool
}{
	{"Get", func(w kindsWorkload) string { return "Get one of " + w.kinds[0].name }, true},
	{"List", func(w kindsWorkload) string {
		return fmt.Sprintf("List %s of a namespace by label (%d)", w.kinds[0].name, w.kinds[0].listed(w.objects))
	}, false},
}

// listed returns how many of n objects the List read selects.
func (k *storeKind) listed(n int) int {
	c := 0
	sel := mustSelector(k.listSelector)
	for i := range n {
		if obj := k.make(i); obj.GetNamespace() == namespaceOf(3) && sel.Matches(labels.Set(obj.GetLabels())) {
			c++
		}
	}
	return c
}

// kindReaders are each system's cache of a kind, in this process.
type kindReaders struct {
	stores   map[string]kindStore // fxkube's, by system
	cr       client.Client        // reads from the cache, deep-copying
	informer cache.SharedIndexInformer
}

// startKindReaders starts the caches of k and waits for them to sync;
// they stop when b ends.
func startKindReaders(b *testing.B, k *storeKind) *kindReaders {
	b.Helper()
	cfg := adminConfig(b)
	bg := newBackground(b)
	ctx, fatal := bg.ctx, mustSucceed(b)
	scheme, err := benchScheme()
	fatal(err)
	conn, err := connection.New(cfg, scheme)
	fatal(err)
	r := &kindReaders{stores: make(map[string]kindStore)}
	for sys, opts := range map[string][]fxstore.Option{fxkube: nil, fxkubeUnshared: {fxstore.WithoutSharing()}, fxkubeBytes: {fxstore.HeldAsBytes()}} {
		registry := fxstore.NewRegistry(scheme)
		r.stores[sys], err = k.fxkube(registry, fxstore.Spec{LabelSelector: k.selector}, opts...)
		fatal(err)
		fatal(registry.Start(ctx, apiserver.NewSource(conn.Client)))
		bg.onStop(registry.Stop)
		fatal(registry.WaitForSync(ctx))
	}

	crCache, err := crcache.New(cfg, crcache.Options{
		Scheme:           scheme,
		ByObject:         map[client.Object]crcache.ByObject{k.object(): {Label: mustSelector(k.selector)}},
		DefaultTransform: crcache.TransformStripManagedFields(),
	})
	fatal(err)
	_, err = crCache.GetInformer(ctx, k.object(), crcache.BlockUntilSynced(false))
	fatal(err)
	bg.wg.Go(func() { _ = crCache.Start(ctx) })
	if !crCache.WaitForCacheSync(ctx) {
		b.Fatal("controller-runtime's cache did not sync")
	}
	r.cr, err = client.New(cfg, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: crCache}})
	fatal(err)

	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	fatal(err)
	r.informer, err = newKindInformer(c, k)
	fatal(err)
	bg.wg.Go(func() { r.informer.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced) {
		b.Fatal("the informer did not sync")
	}
	return r
}

// benchKindReads measures Get and List of w's first kind on each system.
func benchKindReads(b *testing.B, w kindsWorkload) {
	k := w.kinds[0]
	r := startKindReaders(b, k)
	keys := make([]client.ObjectKey, 1024)
	for j := range keys {
		keys[j] = k.key((j * 7919) % w.objects)
	}
	ctx := context.Background()
	ns, want := namespaceOf(3), k.listed(w.objects)
	sel := mustSelector(k.listSelector)
	matching := client.MatchingLabelsSelector{Selector: sel}
	count := func(got int, err error) error {
		if err == nil && got != want {
			err = fmt.Errorf("listed %d objects; want %d", got, want)
		}
		return err
	}
	ops := map[string]map[string]func(i int) error{"Get": {}, "List": {}}
	for sys, s := range r.stores {
		ops["Get"][sys] = func(i int) error {
			_, err := s.get(keys[i&1023].Namespace, keys[i&1023].Name)
			return err
		}
		ops["List"][sys] = func(int) error { return count(s.count(client.InNamespace(ns), matching)) }
	}
	ops["Get"][controllerRuntime] = func(i int) error { return r.cr.Get(ctx, keys[i&1023], k.object()) }
	ops["List"][controllerRuntime] = func(int) error {
		l := k.list()
		err := r.cr.List(ctx, l, client.InNamespace(ns), matching)
		return count(meta.LenList(l), err)
	}
	indexer := r.informer.GetIndexer()
	ops["Get"][plainInformers] = func(i int) error {
		_, ok, err := indexer.GetByKey(keys[i&1023].String())
		if err == nil && !ok {
			err = fmt.Errorf("no %s", keys[i&1023])
		}
		return err
	}
	ops["List"][plainInformers] = func(int) error {
		n := 0
		err := cache.ListAllByNamespace(indexer, ns, sel, func(any) { n++ })
		return count(n, err)
	}
	settle(b)
	for _, op := range kindReadOps {
		for _, sys := range kindsSystems {
			b.Run(fmt.Sprintf("op=%s/system=%s", op.name, sys), func(b *testing.B) {
				benchRead(b, kindResults, w.objects, kindsName(w, sys), op.name, ops[op.name][sys])
			})
		}
	}
}
