package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// crSystem is a workload on controller-runtime managers: one for the shared
// workload (newControllerRuntime), one per operator for the hosting workload
// (newManagers).
//
// The shared workload is written the way controller-runtime wants it: a
// cache holds one informer per kind, so each ConfigMap variant beyond the
// first needs a cache of its own, here a cluster.Cluster added to the
// manager (its caches start, and are waited for, before the controllers).
// Every cache strips managedFields.
type crSystem struct {
	mgrs    []manager.Manager
	readers map[string]crReader // by spec, for counting
	running []cache.Informer

	cancel context.CancelFunc
	done   chan error
}

// crReader is a cache and the list type to count a spec's objects with.
type crReader struct {
	cache client.Reader
	list  func() client.ObjectList
}

func newControllerRuntime(cfg *rest.Config, h *harness) (system, error) {
	// A scheme of its own, as kubebuilder's main.go makes it (and as
	// fxstore.Module does).
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	strip := cache.TransformStripManagedFields()
	configMaps := func(v variant) map[client.Object]cache.ByObject {
		return map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: mustSelector(v.selector)}}
	}
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultLabelSelector: mustSelector(everything),
			DefaultTransform:     strip,
			ByObject:             configMaps(front),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	s := &crSystem{mgrs: []manager.Manager{mgr}, readers: make(map[string]crReader)}

	// The ConfigMap variant of each cache, and the client reading it.
	caches := map[string]cache.Cache{front.name: mgr.GetCache()}
	clients := map[string]client.Client{front.name: mgr.GetClient()}
	for _, v := range []variant{back, all} {
		c, err := cluster.New(cfg, func(o *cluster.Options) {
			o.Scheme = scheme
			o.HTTPClient = mgr.GetHTTPClient()
			o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mgr.GetRESTMapper(), nil }
			o.Cache = cache.Options{DefaultTransform: strip, ByObject: configMaps(v)}
		})
		if err != nil {
			return nil, fmt.Errorf("cluster for ConfigMaps %s: %w", v.selector, err)
		}
		if err := mgr.Add(c); err != nil {
			return nil, err
		}
		caches[v.name], clients[v.name] = c.GetCache(), c.GetClient()
	}

	// Ask for every informer now, so all five start with their caches;
	// otherwise each would start only when a controller or a read first
	// needs it.
	errs := []error{
		s.inform("secrets", mgr.GetCache(), &corev1.Secret{}, secretList),
		s.inform("deployments", mgr.GetCache(), &appsv1.Deployment{}, func() client.ObjectList { return &appsv1.DeploymentList{} }),
	}
	for _, v := range variants {
		errs = append(errs, s.inform("configmaps/"+v.name, caches[v.name], &corev1.ConfigMap{}, configMapList))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	for _, m := range h.controllers {
		r := &crReconciler{h: h, t: h.trackers[m.name], configMaps: clients[m.primary.name], client: mgr.GetClient()}
		err := builder.ControllerManagedBy(mgr).
			Named(m.name).
			WatchesRawSource(source.Kind(caches[m.primary.name], &corev1.ConfigMap{},
				&handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{}, countUpdates[*corev1.ConfigMap](r.t))).
			Complete(r)
		if err != nil {
			return nil, fmt.Errorf("controller %s: %w", m.name, err)
		}
	}
	return s, nil
}

func configMapList() client.ObjectList { return &corev1.ConfigMapList{} }
func secretList() client.ObjectList    { return &corev1.SecretList{} }

// newManagers is the hosting workload on controller-runtime: one
// ctrl.NewManager per operator, all in this process, as one main.go would
// run them (one scheme; each manager its own cache, client and connection).
//
// The managers log through zap, as kubebuilder's main.go sets them up, into
// a core that writes nothing: what fxkube's app logs into here. With
// logr.Discard, controller-runtime would skip building each reconcile's
// logger (about 1.5 µs), which no hosted operator can, its logger being the
// app's.
func newManagers(cfg *rest.Config, h *harness) (system, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	log := zapr.NewLogger(zap.New(newMarkCore()))
	s := &crSystem{readers: make(map[string]crReader)}
	for _, m := range h.controllers {
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Logger:                 log,
			Scheme:                 scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Cache:                  operatorCache(),
		})
		if err != nil {
			return nil, fmt.Errorf("manager of %s: %w", m.name, err)
		}
		if err := setupOperator(m, h)(mgr); err != nil {
			return nil, fmt.Errorf("set up %s: %w", m.name, err)
		}
		// The informers the controller will ask for at start, asked for now
		// to watch them sync (the index already asked for Secrets).
		err = errors.Join(
			s.inform("configmaps/"+all.name, mgr.GetCache(), &corev1.ConfigMap{}, configMapList),
			s.inform("secrets", mgr.GetCache(), &corev1.Secret{}, secretList))
		if err != nil {
			return nil, err
		}
		s.mgrs = append(s.mgrs, mgr)
	}
	return s, nil
}

// inform gets c's informer of obj's kind without waiting for it to sync,
// and keeps it to watch it sync; the first cache informing a spec counts
// its objects.
func (s *crSystem) inform(spec string, c cache.Cache, obj client.Object, list func() client.ObjectList) error {
	i, err := c.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("informer for %s: %w", spec, err)
	}
	s.running = append(s.running, i)
	if _, ok := s.readers[spec]; !ok {
		s.readers[spec] = crReader{cache: c, list: list}
	}
	return nil
}

// crReconciler reads through controller-runtime's cached clients, which
// deep-copy every object they return (the default).
type crReconciler struct {
	h          *harness
	t          *tracker
	configMaps client.Reader // the cache of its ConfigMap variant
	client     client.Reader // the manager's client: Secrets, Deployments
}

func (r *crReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.h.wait()
	var cm corev1.ConfigMap
	if err := r.configMaps.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var secret corev1.Secret
	var deploy appsv1.Deployment
	_ = r.client.Get(ctx, req.NamespacedName, &secret)
	_ = r.client.Get(ctx, req.NamespacedName, &deploy)
	r.t.reconcileConfigMap(&cm, &secret, &deploy)
	return reconcile.Result{}, nil
}

func (s *crSystem) start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan error, len(s.mgrs))
	for _, mgr := range s.mgrs {
		go func() { s.done <- mgr.Start(ctx) }()
	}
}

func (s *crSystem) synced() (bool, error) {
	select {
	case err := <-s.done:
		s.done <- err // for stop
		return false, fmt.Errorf("manager stopped: %w", err)
	default:
	}
	for _, i := range s.running {
		if !i.HasSynced() {
			return false, nil
		}
	}
	return true, nil
}

func (s *crSystem) counts() (map[string]int, error) {
	out := make(map[string]int, len(s.readers))
	for name, r := range s.readers {
		list := r.list()
		if err := r.cache.List(context.Background(), list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		out[name] = meta.LenList(list)
	}
	return out, nil
}

func (s *crSystem) informers() int { return len(s.running) }

func (s *crSystem) details(context.Context) (map[string]time.Duration, error) { return nil, nil }

// stop stops the managers and waits for each, or ctx.
func (s *crSystem) stop(ctx context.Context) error {
	s.cancel()
	var errs []error
	for range s.mgrs {
		select {
		case err := <-s.done:
			errs = append(errs, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}
