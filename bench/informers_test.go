package bench

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// informersSystem is the workload as teams write it before they share:
// each module builds its own SharedInformerFactory per label selector (a
// factory has one), so every consumer has its own informers, and runs its
// controller in the shape of k8s.io/sample-controller. Objects are kept as
// the API server sends them (managedFields included), client-go's default.
type informersSystem struct {
	controllers []*plainController
	all         []cache.SharedIndexInformer
	stores      map[string]cache.SharedIndexInformer // by spec, the first module's

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// plainController is one module: its factories, if it starts its own
// informers, and its controller.
type plainController struct {
	h         *harness
	t         *tracker
	factories []informers.SharedInformerFactory
	queue     workqueue.TypedRateLimitingInterface[cache.ObjectName]
	reconcile func(key cache.ObjectName)
}

func newPlainController(h *harness, name string, reconcile func(key cache.ObjectName)) *plainController {
	return &plainController{
		h: h,
		t: h.trackers[name],
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: name}),
		reconcile: reconcile,
	}
}

// watch enqueues the objects of i's events, counting the updates at the
// round's version.
func (c *plainController) watch(i cache.SharedIndexInformer) error {
	_, err := i.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(_, obj any) {
			if o, ok := obj.(client.Object); ok {
				c.t.updated(versionOf(o))
			}
			c.enqueue(obj)
		},
		DeleteFunc: c.enqueue,
	})
	return err
}

// protobuf makes a client-go clientset talk protobuf, as controller-runtime's
// clients (and so fxkube's stores) do for built-in kinds, so that the
// systems differ in how many informers they run, not in wire format.
func protobuf(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

func newInformers(cfg *rest.Config, h *harness) (system, error) {
	kube, err := kubernetes.NewForConfig(protobuf(cfg))
	if err != nil {
		return nil, err
	}
	s := &informersSystem{stores: make(map[string]cache.SharedIndexInformer)}
	for _, m := range modules {
		var (
			configMaps  corelisters.ConfigMapLister
			secrets     corelisters.SecretLister
			deployments appslisters.DeploymentLister
		)
		c := newPlainController(h, m.name, func(key cache.ObjectName) {
			cm, err := configMaps.ConfigMaps(key.Namespace).Get(key.Name)
			if err == nil {
				secret, _ := secrets.Secrets(key.Namespace).Get(key.Name)
				deploy, _ := deployments.Deployments(key.Namespace).Get(key.Name)
				h.trackers[m.name].reconcileConfigMap(cm, secret, deploy)
			}
		})
		factory := make(map[string]informers.SharedInformerFactory)
		for _, v := range variants {
			f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.LabelSelector = v.selector
			}))
			factory[v.name] = f
			c.factories = append(c.factories, f)
			s.keep("configmaps/"+v.name, f.Core().V1().ConfigMaps().Informer())
		}
		// Secrets and Deployments share the factory whose selector fits.
		s.keep("secrets", factory[all.name].Core().V1().Secrets().Informer())
		s.keep("deployments", factory[all.name].Apps().V1().Deployments().Informer())
		configMaps = factory[m.primary.name].Core().V1().ConfigMaps().Lister()
		secrets = factory[all.name].Core().V1().Secrets().Lister()
		deployments = factory[all.name].Apps().V1().Deployments().Lister()
		if err := c.watch(factory[m.primary.name].Core().V1().ConfigMaps().Informer()); err != nil {
			return nil, err
		}
		s.controllers = append(s.controllers, c)
	}
	return s, nil
}

func (s *informersSystem) keep(name string, i cache.SharedIndexInformer) {
	s.all = append(s.all, i)
	if _, ok := s.stores[name]; !ok {
		s.stores[name] = i
	}
}

func (c *plainController) enqueue(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if name, err := cache.ObjectToName(obj); err == nil {
		c.queue.Add(name)
	}
}

// run starts the module's informers, waits for them the usual way (client-go
// polls every 100ms) and runs one worker, like controller-runtime's default.
func (c *plainController) run(ctx context.Context) {
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	for _, f := range c.factories {
		f.WaitForCacheSync(ctx.Done())
	}
	for c.processNextWorkItem() {
	}
}

func (c *plainController) processNextWorkItem() bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	c.h.wait()
	c.reconcile(key)
	c.queue.Forget(key)
	return true
}

func (s *informersSystem) start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	for _, c := range s.controllers {
		s.wg.Go(func() { c.run(ctx) })
	}
}

func (s *informersSystem) synced() (bool, error) { return allSynced(slices.Values(s.all)), nil }

func (s *informersSystem) counts() (map[string]int, error) { return countsOf(s.stores), nil }

// allSynced reports whether every informer of infs has synced.
func allSynced(infs iter.Seq[cache.SharedIndexInformer]) bool {
	for i := range infs {
		if !i.HasSynced() {
			return false
		}
	}
	return true
}

// countsOf returns how many objects each of stores holds, by name.
func countsOf(stores map[string]cache.SharedIndexInformer) map[string]int {
	out := make(map[string]int, len(stores))
	for name, i := range stores {
		out[name] = len(i.GetIndexer().ListKeys())
	}
	return out
}

// shutDownWithin runs shutDown, and waits for it until ctx ends.
func shutDownWithin(ctx context.Context, shutDown func()) error {
	done := make(chan struct{})
	go func() {
		shutDown()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("informers did not stop: %w", ctx.Err())
	}
}

func (s *informersSystem) informers() int { return len(s.all) }

func (s *informersSystem) details(context.Context) (map[string]time.Duration, error) {
	return nil, nil
}

func (s *informersSystem) stop(ctx context.Context) error {
	if s.cancel != nil {
		s.cancel()
	}
	for _, c := range s.controllers {
		c.queue.ShutDown()
	}
	return shutDownWithin(ctx, func() {
		s.wg.Wait()
		for _, c := range s.controllers {
			for _, f := range c.factories {
				f.Shutdown()
			}
		}
	})
}
