package bench

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/lifecycle"
)

// fxkubeSystem is the workload as an fxkube app: fxstore.Module,
// fxcontroller.Module and lifecycle, with one fx module per workload module,
// started and stopped through fx like cmd/app does.
type fxkubeSystem struct {
	app      *fx.App
	registry *fxstore.Registry
	stores   map[string]store // one per spec, as the first module got it
	marks    *markCore

	startedAt time.Time
	startCPU  time.Duration // the process's CPU time at startedAt
	started   chan struct{} // closed when app.Start has returned
	startErr  error
	startTook time.Duration
}

// store is what the harness needs of a typed store.
type store interface {
	HasSynced() bool
	Count() (int, error)
}

func newFxkube(cfg *rest.Config, h *harness) (system, error) {
	return newFxkubeApp(cfg, func(stores map[string]store) []fx.Option {
		opts := make([]fx.Option, len(h.controllers))
		for i, m := range h.controllers {
			opts[i] = fxkubeModule(m, h, stores)
		}
		return opts
	})
}

// newFxkubeApp builds an app of fxstore.Module, fxcontroller.Module,
// lifecycle and what modules returns, given the map where the harness finds
// one store per spec.
func newFxkubeApp(cfg *rest.Config, modules func(stores map[string]store) []fx.Option) (*fxkubeSystem, error) {
	s := &fxkubeSystem{stores: make(map[string]store), marks: newMarkCore("stores started", "all stores synced")}
	opts := []fx.Option{
		fx.Supply(cfg, zap.New(s.marks)),
		fxstore.Module,
		fxcontroller.Module,
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
		fx.Populate(&s.registry),
	}
	s.app = fx.New(append(opts, modules(s.stores)...)...)
	return s, s.app.Err()
}

// newHostedFxkube is the hosting workload as an fxkube app: each operator
// hosted with fxcontroller.SetupWithManager and the operators' cache
// options. The harness asks for the stores those options resolve to, to
// watch them sync and count them: a store more, had they not been the
// same, which TestHostedOperatorsShareStores rules out.
func newHostedFxkube(cfg *rest.Config, h *harness) (system, error) {
	return newFxkubeApp(cfg, func(stores map[string]store) []fx.Option {
		opts := []fx.Option{fx.Invoke(func(r *fxstore.Registry) error {
			cms, err1 := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: everything})
			secrets, err2 := fxstore.For[*corev1.Secret](r, fxstore.Spec{LabelSelector: everything})
			stores["configmaps/"+all.name], stores["secrets"] = cms, secrets
			return errors.Join(err1, err2)
		})}
		for _, m := range h.controllers {
			opts = append(opts, fxcontroller.SetupWithManager(setupOperator(m, h),
				fxcontroller.WithName(m.name), fxcontroller.WithCacheOptions(operatorCache())))
		}
		return opts
	})
}

// fxkubeModule is one workload module as an fx module: it asks for all five
// specs and declares its controller. Its reconciler reads the stores
// directly: no copies.
func fxkubeModule(m module, h *harness, seen map[string]store) fx.Option {
	t := h.trackers[m.name]
	return fx.Module(m.name, fxcontroller.Provide(func(stores *fxstore.Registry) (*fxcontroller.Controller, error) {
		var errs []error
		keep := func(name string, s store, err error) {
			errs = append(errs, err)
			if _, ok := seen[name]; !ok && err == nil {
				seen[name] = s
			}
		}
		cms := make(map[string]*fxstore.Store[*corev1.ConfigMap], len(variants))
		for _, v := range variants {
			s, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{LabelSelector: v.selector})
			cms[v.name] = s
			keep("configmaps/"+v.name, s, err)
		}
		secrets, err := fxstore.For[*corev1.Secret](stores, fxstore.Spec{LabelSelector: everything})
		keep("secrets", secrets, err)
		deployments, err := fxstore.For[*appsv1.Deployment](stores, fxstore.Spec{LabelSelector: everything})
		keep("deployments", deployments, err)
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		cm := cms[m.primary.name]
		return fxcontroller.New(m.name, cm, reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			h.wait()
			obj, err := cm.Get(req.Namespace, req.Name)
			if err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			secret, _ := secrets.Get(req.Namespace, req.Name)
			deploy, _ := deployments.Get(req.Namespace, req.Name)
			t.reconcileConfigMap(obj, secret, deploy)
			return reconcile.Result{}, nil
		}), fxcontroller.WithPredicates(countUpdates[client.Object](t)))
	}))
}

func (s *fxkubeSystem) start(ctx context.Context) {
	s.started = make(chan struct{})
	s.startedAt, s.startCPU = time.Now(), processCPU()
	go func() {
		defer close(s.started)
		s.startErr = s.app.Start(ctx)
		s.startTook = time.Since(s.startedAt)
	}()
}

func (s *fxkubeSystem) synced() (bool, error) {
	select {
	case <-s.started:
		if s.startErr != nil {
			return false, s.startErr
		}
	default:
	}
	for _, st := range s.stores {
		if !st.HasSynced() {
			return false, nil
		}
	}
	return true, nil
}

func (s *fxkubeSystem) counts() (map[string]int, error) {
	out := make(map[string]int, len(s.stores))
	for name, st := range s.stores {
		n, err := st.Count()
		if err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, nil
}

// informers counts the stores that run an informer: views run none.
func (s *fxkubeSystem) informers() int {
	n := 0
	for _, st := range s.registry.Stores() {
		if st.ViewOf == nil {
			n++
		}
	}
	return n
}

// details breaks fxkube's start down: fx.Start until the stores were bound
// and started (discovery and access reviews), until all had synced (as
// lifecycle logged it), and until Start returned with the controllers
// running; the longest informer sync, from informer start to synced; and
// the CPU the process used from fx.Start until each logged mark.
func (s *fxkubeSystem) details(ctx context.Context) (map[string]time.Duration, error) {
	select {
	case <-s.started:
		if s.startErr != nil {
			return nil, s.startErr
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d := map[string]time.Duration{"start returned": s.startTook}
	at, cpu := s.marks.times()
	for msg := range at {
		d[msg] = at[msg].Sub(s.startedAt)
		d[msg+" cpu"] = cpu[msg] - s.startCPU
	}
	for _, info := range s.registry.Stores() {
		d["slowest informer sync"] = max(d["slowest informer sync"], info.Status.SyncDuration)
	}
	return d, nil
}

func (s *fxkubeSystem) stop(ctx context.Context) error { return s.app.Stop(ctx) }

// markCore is a zap core that only notes when messages of interest were
// logged, and the process's CPU time then, so that timing fxkube's start-up
// costs no memory for logs.
type markCore struct {
	messages map[string]bool
	mu       sync.Mutex
	at       map[string]time.Time
	cpu      map[string]time.Duration
}

func newMarkCore(messages ...string) *markCore {
	c := &markCore{messages: make(map[string]bool), at: make(map[string]time.Time), cpu: make(map[string]time.Duration)}
	for _, m := range messages {
		c.messages[m] = true
	}
	return c
}

func (c *markCore) Enabled(l zapcore.Level) bool      { return l >= zapcore.InfoLevel }
func (c *markCore) With([]zapcore.Field) zapcore.Core { return c }
func (c *markCore) Sync() error                       { return nil }

func (c *markCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.messages[e.Message] {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *markCore) Write(e zapcore.Entry, _ []zapcore.Field) error {
	cpu := processCPU()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at[e.Message], c.cpu[e.Message] = e.Time, cpu
	return nil
}

// times returns when each message was logged, and the CPU time then.
func (c *markCore) times() (map[string]time.Time, map[string]time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.at), maps.Clone(c.cpu)
}
