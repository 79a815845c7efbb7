package fxcluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/grace"
)

// Controller reconciles the objects of a store in every member cluster,
// with one queue of Requests that carry the cluster's name. Underneath is
// controller-runtime's typed controller: its workqueue, rate limiting,
// concurrency, panic recovery and reconcile metrics apply.
//
// A member's objects enqueue requests once it has joined. A request for
// a member that has left, or is leaving, is dropped quietly.
type Controller struct {
	name    string
	fleet   *Fleet
	primary Members
	// selects picks the members the controller runs in; nil: all.
	selects func(ClusterName) bool
	watches []watch
	writes  []Write
	r       Reconciler
	log     *zap.Logger

	ctrl controller.TypedController[Request]
}

var (
	_ manager.Runnable               = (*Controller)(nil)
	_ manager.LeaderElectionRunnable = (*Controller)(nil)
)

// Store is a store of the app's own cluster, such as an *fxstore.Store.
type Store interface {
	Key() fxstore.Key
	Informer() cache.SharedIndexInformer
}

// watch is a store whose changes enqueue requests in a member: the
// member's own store (members), or the app's (own).
type watch struct {
	members Members
	own     Store
	fn      handler.MapFunc
}

// ControllerOption configures NewController.
type ControllerOption interface {
	applyToController(*controllerOptions)
}

type controllerOptions struct {
	selects       func(ClusterName) bool
	watches       []watch
	writes        []Write
	maxConcurrent int
	logger        *zap.Logger
	errs          []error
}

type controllerOption func(*controllerOptions)

func (o controllerOption) applyToController(c *controllerOptions) { o(c) }

// Watches makes changes to secondary, in a member, enqueue the requests fn
// maps them to, in that member.
func Watches(secondary Members, fn handler.MapFunc) ControllerOption {
	return controllerOption(func(o *controllerOptions) {
		if secondary == nil || fn == nil {
			o.errs = append(o.errs, errors.New("fxcluster.Watches: store and map function are required"))
			return
		}
		o.watches = append(o.watches, watch{members: secondary, fn: fn})
	})
}

// WatchesOwnCluster makes changes to store, in the app's own cluster,
// enqueue the requests fn maps them to in every member. A member that
// joins gets a request for each of store's objects that fn maps.
func WatchesOwnCluster(store Store, fn handler.MapFunc) ControllerOption {
	return controllerOption(func(o *controllerOptions) {
		if store == nil || fn == nil {
			o.errs = append(o.errs, errors.New("fxcluster.WatchesOwnCluster: store and map function are required"))
			return
		}
		o.watches = append(o.watches, watch{own: store, fn: fn})
	})
}

// InClusters makes the controller run in the member clusters selects
// selects only, as they join. Defaults to every member in which its
// primary store is asked for.
func InClusters(selects func(ClusterName) bool) ControllerOption {
	return controllerOption(func(o *controllerOptions) {
		if selects == nil {
			o.errs = append(o.errs, errors.New("fxcluster.InClusters: the function is nil"))
			return
		}
		o.selects = selects
	})
}

// WithMaxConcurrentReconciles sets how many requests, of all members, are
// reconciled at once. Defaults to 1.
func WithMaxConcurrentReconciles(n int) ControllerOption {
	return controllerOption(func(o *controllerOptions) { o.maxConcurrent = n })
}

// WithLogger sets the controller's logger. Defaults to the fleet's, named
// after the controller.
func WithLogger(l *zap.Logger) ControllerOption {
	return controllerOption(func(o *controllerOptions) { o.logger = l })
}

// NewController returns a controller named name that reconciles the
// objects of primary, in every member cluster, with r. Each change to a
// primary object in a member enqueues a Request for it, with the
// member's name. Name it as fxcontroller.New's are named: unique in the
// app, a Kubernetes qualified name.
//
// NewController does no I/O. Call it while the app is built, and provide
// the controller with Provide: it runs on the leader, and each member's
// requests start once the member has joined.
func NewController(name string, primary Members, r Reconciler, opts ...ControllerOption) (*Controller, error) {
	var o controllerOptions
	for _, opt := range opts {
		if opt != nil {
			opt.applyToController(&o)
		}
	}
	errs := o.errs
	if name == "" {
		errs = append(errs, errors.New(`name is empty; name the controller, as in fxcluster.NewController("fleet", ...)`))
	} else if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("invalid name: %s", strings.Join(msgs, "; ")))
	}
	if primary == nil {
		errs = append(errs, errors.New("primary store is nil; pass the stores fxcluster.For returned (check its error)"))
	}
	if r == nil {
		errs = append(errs, errors.New("reconciler is nil"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("controller %q: %w", name, err)
	}
	f := primary.fleetOf()
	for _, w := range o.watches {
		if w.members != nil && w.members.fleetOf() != f {
			return nil, fmt.Errorf("controller %q: store %s is of another fleet", name, w.members.Key())
		}
	}
	log := o.logger
	if log == nil {
		log = f.log.Named(name)
	}
	c := &Controller{name: name, fleet: f, primary: primary, selects: o.selects, watches: o.watches, writes: o.writes, r: r, log: log}
	ctrl, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[Request]{
		// Several apps may share a process, in tests.
		SkipNameValidation:      new(true),
		MaxConcurrentReconciles: o.maxConcurrent,
		NeedLeaderElection:      new(true),
		RecoverPanic:            new(true),
		Reconciler:              reconcile.TypedFunc[Request](c.reconcile),
		LogConstructor:          c.logFor,
	})
	if err != nil {
		return nil, fmt.Errorf("controller %q: %w", name, err)
	}
	c.ctrl = ctrl
	if err := f.declare(c); err != nil {
		return nil, fmt.Errorf("controller %q: %w", name, err)
	}
	return c, nil
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.name }

// String describes the controller.
func (c *Controller) String() string {
	return fmt.Sprintf("controller %q of %s in every member cluster", c.name, c.primary.Key())
}

// Start runs the controller until ctx ends, as fxcontroller's do.
func (c *Controller) Start(ctx context.Context) error {
	if err := c.ctrl.Start(ctx); err != nil {
		return fmt.Errorf("%s: %w", c, err)
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the
// controller runs on the leader, or on every replica for the members it
// holds when the fleet shares them out (Options.Share).
func (c *Controller) NeedLeaderElection() bool { return c.fleet.leaderOnly() }

// reconcile runs r for req, if req's member is ready. Work in flight when
// the member leaves runs on until the stop timeout.
func (c *Controller) reconcile(ctx context.Context, req Request) (reconcile.Result, error) {
	m := c.fleet.member(req.ClusterName)
	// A member whose bucket this replica no longer holds is fenced at
	// once: its leaving may not have begun yet.
	if m == nil || !c.fleet.owns(m.offer.bucket) {
		return reconcile.Result{}, nil
	}
	done, ok := m.acquire()
	if !ok {
		return reconcile.Result{}, nil
	}
	defer done()
	ctx, cancel := grace.Context(ctx)
	defer cancel()
	ctx, cancelLeft := context.WithCancelCause(ctx)
	defer cancelLeft(nil)
	stop := context.AfterFunc(m.hardStop, func() { cancelLeft(context.Cause(m.hardStop)) })
	defer stop()
	return c.r.Reconcile(ctx, req)
}

func (c *Controller) logFor(req *Request) logr.Logger {
	l := c.log
	if req != nil {
		l = l.With(zap.String("cluster", string(req.ClusterName)), zap.String("namespace", req.Namespace), zap.String("name", req.Name))
	}
	return zapr.NewLogger(l)
}

// runsIn reports whether the controller runs in the member name: its
// primary store is asked for there, and InClusters selects it.
func (c *Controller) runsIn(name ClusterName) bool {
	return c.primary.asksIn(name) && (c.selects == nil || c.selects(name))
}

// declare implements declaration: a controller asks for no stores of its
// own; its Stores do.
func (*Controller) declare(*member) error { return nil }

func (*Controller) forget(*member) {}

// engage starts the controller's sources in m.
func (c *Controller) engage(m *member) (func(), error) {
	if !c.runsIn(m.name) {
		return func() {}, nil
	}
	primary, err := c.primary.in(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c, err)
	}
	sources := []*memberSource{newMemberSource(m.name, primary, nil)}
	for _, w := range c.watches {
		store := w.own
		if w.members != nil && !w.members.asksIn(m.name) {
			continue // asked for in other members only
		}
		if w.members != nil {
			if store, err = w.members.in(m); err != nil {
				return nil, fmt.Errorf("%s: %w", c, err)
			}
		}
		sources = append(sources, newMemberSource(m.name, store, w.fn))
	}
	stop := func() {
		for _, s := range sources {
			s.stop()
		}
	}
	for _, src := range sources {
		if err := c.ctrl.Watch(src); err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w", c, err)
		}
	}
	return stop, nil
}

// memberSource enqueues the requests of one store's changes in one
// member: the objects' own, or those fn maps them to.
type memberSource struct {
	cluster  ClusterName
	key      fxstore.Key
	informer cache.SharedIndexInformer
	fn       handler.MapFunc // nil: the object's own request

	mu      sync.Mutex
	stopped bool
	reg     cache.ResourceEventHandlerRegistration
}

// Start implements source.TypedSource. A source stopped before the
// controller started it starts nothing.
func (s *memberSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[Request]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := obj.(client.Object)
		if !ok {
			return
		}
		if s.fn == nil {
			q.Add(Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}, ClusterName: s.cluster})
			return
		}
		for _, req := range s.fn(ctx, o) {
			q.Add(Request{Request: req, ClusterName: s.cluster})
		}
	}
	reg, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, obj any) {
			if s.fn != nil {
				enqueue(old)
			}
			enqueue(obj)
		},
		DeleteFunc: enqueue,
	})
	if err != nil {
		return fmt.Errorf("subscribe to store %s for cluster %q: %w", s.key, s.cluster, err)
	}
	s.reg = reg
	return nil
}

// stop removes the source's handler, or keeps it from being added.
func (s *memberSource) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.reg != nil {
		_ = s.informer.RemoveEventHandler(s.reg)
		s.reg = nil
	}
}

func newMemberSource(cluster ClusterName, store Store, fn handler.MapFunc) *memberSource {
	return &memberSource{cluster: cluster, key: store.Key(), informer: store.Informer(), fn: fn}
}

func (s *memberSource) String() string {
	return fmt.Sprintf("store %s for cluster %q", s.key, s.cluster)
}
