package fxcontroller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/caller"
	"github.com/fxkube/fxkube/internal/grace"
	internalprimary "github.com/fxkube/fxkube/internal/primary"
	"github.com/fxkube/fxkube/internal/storehooks"
)

// Controller reconciles the objects of one store with a controller-runtime
// reconciler, and is fed by the shared informers of its stores. It is a
// controller-runtime manager.Runnable: the app's lifecycle starts it once every
// store has synced.
type Controller struct {
	name        string
	declaredBy  string
	primary     fxstore.Key
	sources     []*storeSource // the primary's first
	writes      []Write
	needsLeader bool
	// whenServed makes the controller wait for its kinds (WhenServed);
	// served, set by Collect, tells which are served.
	whenServed bool
	served     *servedKinds

	// options build the controller-runtime controller, anew for each run
	// but the first: one starts once. ctrl is New's; unstarted is the
	// next run's, until it starts, owned by Start.
	options   controller.Options
	ctrl      controller.Controller
	unstarted controller.Controller
	status    status
	// changed wakes Start to check whether the controller may run: a CRD
	// changed, or the controller was enabled or disabled.
	changed     chan struct{}
	switched    switched
	startedOnce atomic.Bool
	// log is set by New and, unless ownLogger (WithLogger), replaced by
	// Collect with the app's before the controller starts.
	log       atomic.Pointer[loggers]
	ownLogger bool
}

// loggers are the controller's logger, as zap and as logr.
type loggers struct {
	zap  *zap.Logger
	logr logr.Logger
}

var (
	_ manager.Runnable               = (*Controller)(nil)
	_ manager.LeaderElectionRunnable = (*Controller)(nil)
	_ reconcile.Reconciler           = (*Controller)(nil)
)

// Primary is what a controller reconciles the objects of: any store, such
// as an *fxstore.Store or an *fxshard.Store, whose objects change as the
// process takes and gives up shards of them. Events of its informer
// enqueue requests; WaitForSync returns once it holds what it should.
type Primary interface {
	Key() fxstore.Key
	Informer() cache.SharedIndexInformer
	WaitForSync(ctx context.Context) error
}

// storeHooks are what fxstore's registry does for fxcontroller and not for
// users.
var storeHooks = storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec, fxstore.Option]()

// New returns a controller named name that reconciles the objects of primary
// with r. Each change to a primary object enqueues a request for it; Watches
// adds secondary stores whose changes enqueue primary objects too. A
// controller of a sharded store (fxshard.For) reconciles only the objects
// of the buckets the replica holds, and runs on every replica unless
// WithLeaderElection(true) says otherwise.
//
// The name identifies the controller in logs, metrics and events (as their
// reporting controller); it must be unique in the app and a Kubernetes
// qualified name, such as "rollout" or "example.com/rollout".
//
// New does no I/O and starts nothing; Start runs the controller. Underneath is
// controller-runtime's controller, so its workqueue, rate limiting,
// concurrency, panic recovery and metrics (controller_runtime_reconcile_*)
// apply.
func New(name string, primary Primary, r reconcile.Reconciler, opts ...Option) (*Controller, error) {
	var gated internalprimary.Gated
	if !isNil(primary) {
		gated = storeHooks.Gate(primary)
	}
	isGated := gated != nil
	o := options{leaderElection: !isGated}
	for _, opt := range opts {
		if opt != nil {
			opt.applyToController(&o)
		}
	}
	var errs []error
	if name == "" {
		errs = append(errs, errors.New(`name is empty; name the controller, as in fxcontroller.New("rollout", ...)`))
	} else if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("invalid name: %s", strings.Join(msgs, "; ")))
	}
	if isNil(primary) {
		errs = append(errs, errors.New("primary store is nil; pass the store fxstore.For or fxshard.For returned (check its error)"))
	}
	if isNil(r) {
		errs = append(errs, errors.New("reconciler is nil"))
	}
	if err := errors.Join(append(errs, append(o.errs, o.setTwice())...)...); err != nil {
		return nil, fmt.Errorf("controller %q: %w", name, err)
	}
	if isGated {
		r = gated.Gate(r)
	}

	c := &Controller{
		name:        name,
		declaredBy:  caller.Outside("github.com/fxkube/fxkube/fxcontroller"),
		primary:     primary.Key(),
		sources:     append([]*storeSource{newStoreSource(primary, &handler.EnqueueRequestForObject{}, o.predicates)}, o.watches...),
		writes:      o.writes,
		needsLeader: o.leaderElection,
		whenServed:  o.whenServed,
		changed:     make(chan struct{}, 1),
	}
	if o.logger != nil {
		c.ownLogger = true
		c.setLogger(o.logger)
	} else {
		c.setLogger(zap.NewNop())
	}
	c.options = controller.Options{
		// Several apps may share a process, in tests; Provide checks that
		// names are unique in each app.
		SkipNameValidation:      new(true),
		MaxConcurrentReconciles: o.maxConcurrent,
		RateLimiter:             o.rateLimiter,
		NeedLeaderElection:      new(o.leaderElection),
		RecoverPanic:            new(true),
		Reconciler:              finishOnStop(r),
		LogConstructor:          c.logFor,
	}
	ctrl, err := c.build()
	if err != nil {
		return nil, err
	}
	c.ctrl, c.unstarted = ctrl, ctrl
	return c, nil
}

// build returns a controller-runtime controller fed by the controller's
// sources, not started.
func (c *Controller) build() (controller.Controller, error) {
	ctrl, err := controller.NewUnmanaged(c.name, c.options)
	if err != nil {
		return nil, fmt.Errorf("controller %q: %w", c.name, err)
	}
	for _, src := range c.sources {
		if err := ctrl.Watch(src); err != nil {
			return nil, fmt.Errorf("controller %q: %w", c.name, err)
		}
	}
	return ctrl, nil
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.name }

// String describes the controller, as `controller "rollout" of
// Deployment.apps/v1 (all namespaces)`.
func (c *Controller) String() string {
	return fmt.Sprintf("controller %q of %s", c.name, c.primary)
}

// Info describes what a controller reads and writes, for the app's describe
// and rbac commands.
type Info struct {
	Name string
	// DeclaredBy is the function that called New, such as
	// "rollout.newController".
	DeclaredBy string
	// Primary is the store whose objects the controller reconciles.
	Primary fxstore.Key
	// Secondary are the stores of its Watches options, in order.
	Secondary []fxstore.Key
	// Writes are what it declared with Writes, in order. Every controller
	// also creates and patches events.k8s.io Events, undeclared.
	Writes []Write
	// NeedsLeader reports whether it runs only on the leader.
	NeedsLeader bool
	// WhenServed reports that it waits for its kinds to be served.
	WhenServed bool
}

// Info describes the controller.
func (c *Controller) Info() Info {
	info := Info{
		Name:        c.name,
		DeclaredBy:  c.declaredBy,
		Primary:     c.primary,
		Writes:      slices.Clone(c.writes),
		NeedsLeader: c.needsLeader,
		WhenServed:  c.whenServed,
	}
	for _, src := range c.sources[1:] {
		info.Secondary = append(info.Secondary, src.key)
	}
	return info
}

// run runs ctrl, one run of the controller, until ctx ends, and
// unsubscribes it from the informers.
func (c *Controller) run(ctx context.Context, ctrl controller.Controller) error {
	err := ctrl.Start(ctx)
	for _, src := range c.sources {
		err = errors.Join(err, src.stop())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c, err)
	}
	return nil
}

// module is the Go package that declared the controller, such as
// "rollout" for rollout.newController: the module it belongs to.
func (c *Controller) module() string {
	pkg, _, _ := strings.Cut(c.declaredBy, ".")
	return pkg
}

// NeedLeaderElection implements manager.LeaderElectionRunnable; see
// WithLeaderElection.
func (c *Controller) NeedLeaderElection() bool { return c.needsLeader }

// Reconcile reconciles req now, in the caller's goroutine, as the running
// controller would: ctx carries the controller's logger (see LoggerFrom) and
// a panic in the reconciler is recovered into an error and counted in
// controller_runtime_reconcile_panics_total. It bypasses the workqueue, so
// it neither retries nor requeues; tests use it to drive a reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return c.ctrl.Reconcile(logr.NewContext(ctx, c.logFor(&req)), req)
}

// Logger returns the controller's logger: the app's, named after the
// controller, with a "controller" field.
func (c *Controller) Logger() *zap.Logger { return c.log.Load().zap }

func (c *Controller) setLogger(l *zap.Logger) {
	l = l.Named(c.name).With(zap.String("controller", c.name))
	c.log.Store(&loggers{zap: l, logr: zapr.NewLogger(l)})
}

// logFor is the controller's LogConstructor: the logger controller-runtime
// puts in the context of each reconcile, with the fields its own default
// adds.
func (c *Controller) logFor(req *reconcile.Request) logr.Logger {
	l := c.log.Load().logr
	if req != nil {
		l = l.WithValues("object", klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
	}
	return l
}

// LoggerFrom returns the zap logger in a reconcile's context: the
// controller's, with the request's fields. It is the logger
// controller-runtime's log.FromContext returns, as a *zap.Logger. Outside a
// controller's reconcile it returns zap.NewNop().
func LoggerFrom(ctx context.Context) *zap.Logger {
	l, err := logr.FromContext(ctx)
	if err != nil {
		return zap.NewNop()
	}
	if u, ok := l.GetSink().(zapr.Underlier); ok {
		return u.GetUnderlying()
	}
	return zap.NewNop()
}

// finishOnStop gives each reconcile of r a context that outlives the
// controller's: when the app stops, a reconcile in flight finishes, with a
// context that ends only once the app's stop bound has passed (see
// lifecycle.Config.StopTimeout), rather than fail half-done. A request
// taken from the queue once the controller was told to stop is dropped
// with the rest of the queue, not reconciled.
func finishOnStop(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if ctx.Err() != nil {
			// Taken from the queue as the controller was told to stop:
			// dropped, as the rest of the queue is.
			return reconcile.Result{}, nil
		}
		ctx, done := grace.Context(ctx)
		defer done()
		return r.Reconcile(ctx, req)
	})
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Func) && rv.IsNil()
}
