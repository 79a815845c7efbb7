package fxcontroller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/caller"
	"github.com/fxkube/fxkube/internal/contract"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/storecache"
)

// SetupWithManager hosts an existing controller-runtime operator in the
// app: setup, such as the body of a kubebuilder cmd/main.go between
// ctrl.NewManager and mgr.Start, runs unchanged with a manager.Manager that
// is a façade over the app rather than a manager of its own:
//
//	var Module = fx.Module("cronjob",
//		fxstore.AddToScheme(batchv1.AddToScheme),
//		fxcontroller.SetupWithManager(func(mgr ctrl.Manager) error {
//			return (&controller.CronJobReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()}).SetupWithManager(mgr)
//		}),
//	)
//
// The manager's cache resolves each kind, with the operator's cache options
// (WithCacheOptions), to the app's store for that spec, shared with every
// module and hosted operator asking for the same; its client reads from
// that cache with controller-runtime's semantics (deep copies, field
// indexes scoped by namespace) and writes through the app's one connection.
// Controllers built with ctrl.NewControllerManagedBy, and runnables passed
// to mgr.Add, run under the app's lifecycle, in the groups of
// controller-runtime's manager (see lifecycle.Runnables): a cache or
// cluster the operator adds starts with the stores, and its controllers'
// stores and caches sync with every other store before any controller
// starts; they run on the leader unless they say otherwise, and they stop
// in order. A kind first read after start gets a store started then,
// through the same pre-flight checks.
//
// setup runs while fx builds the app and must do no I/O. A setup that
// returns an error or panics fails fx.New, naming the function. What the
// manager cannot do (Start, metrics server extra handlers) fails with an
// error saying what to do instead.
//
// Webhooks registered on mgr.GetWebhookServer() (ctrl.NewWebhookManagedBy:
// defaulting, validating and conversion) are served by the app's one
// webhook server, lifecycle.Webhooks, which starts before any store lists;
// converters go to its one conversion registry (GetConverterRegistry).
// The manager's webhook server holds only the operator's own paths
// (lifecycle.Webhooks.Operator): a path two operators register is served
// by one handler running both operators' webhooks, in the order the
// operators were set up.
//
// Options configure the operator: WithName, WithControllerPrefix (to name
// its controllers apart from another operator's), WithManagerOptions (the
// ctrl.Options of its main, as they are), WithCacheOptions,
// WithClientOptions, Writes (for the rbac command), WithLeaderElection,
// WithMaxConcurrentReconciles, and WithLogger or WithLogr. Two options
// that set one thing fail fx.New, naming both.
func SetupWithManager(setup func(manager.Manager) error, opts ...HostedOption) fx.Option {
	if setup == nil {
		return fx.Error(errors.New("fxcontroller.SetupWithManager: setup function is nil"))
	}
	o := options{leaderElection: true, name: caller.Of(setup)}
	for _, opt := range opts {
		if opt != nil {
			opt.applyToHosted(&o)
		}
	}
	if err := errors.Join(append(o.errs, o.setTwice())...); err != nil {
		return fx.Error(fmt.Errorf("fxcontroller.SetupWithManager(%s): %w", caller.Of(setup), err))
	}
	if o.inEveryMember {
		return inEveryMember(caller.Of(setup), setup, o)
	}
	tlsOpts := make([]lifecycle.WebhookTLSOption, len(o.webhookTLS))
	for i, opt := range o.webhookTLS {
		tlsOpts[i] = opt
	}
	return fx.Options(
		fx.Provide(fx.Annotate(
			func(p hostParams) (hostResult, error) { return host(p, caller.Of(setup), setup, o) },
		)),
		lifecycle.WebhookTLS(tlsOpts...),
	)
}

// hostParams are what a hosted operator is built from.
type hostParams struct {
	fx.In

	Registry   *fxstore.Registry
	Scheme     *k8sruntime.Scheme
	Connection *connection.Connection
	Recorders  RecorderProvider
	Logger     *zap.Logger      `optional:"true"`
	Config     lifecycle.Config `optional:"true"`
	Selection  Selection        `optional:"true"`
	// Webhooks is the app's webhook server, which lifecycle.Module
	// provides and serves.
	Webhooks *lifecycle.Webhooks `optional:"true"`
}

type hostResult struct {
	fx.Out

	Hosted    *Hosted            `group:"fxcontroller.hosted"`
	Runnables []manager.Runnable `group:"fxkube.runnables,flatten"`
	Checks    []lifecycle.Check  `group:"fxkube.checks,flatten"`
}

// Hosted is a controller-runtime operator hosted with SetupWithManager.
type Hosted struct {
	name string
	// disabled is set for an operator the app's Selection leaves out: it
	// was not set up.
	disabled    bool
	info        Info
	controllers map[string]reconcile.Reconciler // by controller name
}

// Declare has the operator's controllers ask for their stores as they do
// when they start (controller-runtime's builder asks for the kinds of For,
// Owns and Watches only then), without starting anything, so that an app
// that is built but not started knows every store: describe and rbac use
// it. Call it only on an app that will not start, before it would; it
// returns once every controller has asked.
func (h *Hosted) Declare(ctx context.Context) error {
	// Bounded: a source that cannot even ask for its store retries for as
	// long as its context lasts, and one over a cache of the operator's
	// own waits that long for a cache that never starts.
	ctx, cancel := context.WithTimeout(ctx, declareTimeout)
	defer cancel() // ends the controllers' queues and sources
	names := h.Controllers()
	errs := make([]error, len(names)) // by controller, in order
	var wg sync.WaitGroup
	for i, name := range names {
		w, ok := h.controllers[name].(contract.WarmupRunnable)
		if !ok {
			continue
		}
		// Its sources ask for their stores, then fail to sync: nothing
		// runs before the app starts.
		wg.Go(func() {
			if err := w.Warmup(ctx); err != nil && !notSyncedBeforeStart(err) {
				errs[i] = fmt.Errorf("controller %q: %w", name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("hosted operator %q: %w", h.name, err)
	}
	return nil
}

// notSyncedBeforeStart reports the warm-up errors of sources that asked
// for their caches and, as nothing runs before the app starts, saw them
// not sync: controller-runtime's Kind source says either, as its wait or
// its context ends first.
func notSyncedBeforeStart(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "cache did not sync") || strings.Contains(msg, "timed out waiting for cache to be synced")
}

// namedController is a hosted controller as the app's lifecycle runs it:
// named in its logs and errors.
type namedController struct {
	hostedController
	operator, name string
}

var _ contract.WarmupRunnable = namedController{}

func (c namedController) String() string {
	return fmt.Sprintf("controller %q of hosted operator %q", c.name, c.operator)
}

// Warmup implements contract.WarmupRunnable.
func (c namedController) Warmup(ctx context.Context) error {
	if w, ok := c.hostedController.(contract.WarmupRunnable); ok {
		return w.Warmup(ctx)
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (c namedController) NeedLeaderElection() bool {
	if l, ok := c.hostedController.(manager.LeaderElectionRunnable); ok {
		return l.NeedLeaderElection()
	}
	return true
}

// declareTimeout bounds Declare.
const declareTimeout = 10 * time.Second

// hostedController is a controller-runtime controller, as a hosted
// operator's setup adds it.
type hostedController interface {
	manager.Runnable
	reconcile.Reconciler
	GetLogger() logr.Logger
}

// Controllers returns the names of the operator's controllers, sorted: the
// names controller-runtime's builder gave them (Named, or the kind).
func (h *Hosted) Controllers() []string { return slices.Sorted(maps.Keys(h.controllers)) }

// Reconcile reconciles req now with the operator's controller named
// controller, in the caller's goroutine, as controller-runtime's controller
// does (panics recovered into errors); tests use it to drive a hosted
// reconciler.
func (h *Hosted) Reconcile(ctx context.Context, controller string, req reconcile.Request) (reconcile.Result, error) {
	c, ok := h.controllers[controller]
	if !ok {
		return reconcile.Result{}, fmt.Errorf("hosted operator %q has no controller %q; it has %q", h.name, controller, h.Controllers())
	}
	return c.Reconcile(ctx, req)
}

// Name is the hosted operator's name (WithName), which consumes its stores.
func (h *Hosted) Name() string { return h.name }

// Info describes what the operator declared: its name, setup function and
// Writes. Its stores are found by its name among the registry's consumers.
func (h *Hosted) Info() Info { return h.info }

func host(p hostParams, setupName string, setup func(manager.Manager) error, o options) (_ hostResult, err error) {
	if !p.Selection.Enabled(o.name) {
		return hostResult{Hosted: &Hosted{name: o.name, disabled: true}}, nil
	}
	log := zap.NewNop()
	if p.Logger != nil {
		log = p.Logger
	}
	if o.logger != nil {
		log = o.logger
	}
	log = log.Named(o.name)
	sink := zapr.NewLogger(log).GetSink()
	if o.logr != nil {
		sink = o.logr.WithName(o.name).GetSink()
	}
	syncTimeout := 2 * time.Minute
	if p.Config.SyncTimeout > 0 {
		syncTimeout = p.Config.SyncTimeout
	}
	if o.manager != nil {
		if err := checkScheme(o.manager.scheme, p.Scheme); err != nil {
			return hostResult{}, fmt.Errorf("hosted operator %q: %w", o.name, err)
		}
	}
	cacheOpts := crcache.Options{}
	if o.cacheOptions != nil {
		cacheOpts = *o.cacheOptions
	}
	c, err := storecache.New(p.Registry, p.Connection.Mapper, cacheOpts,
		storecache.WithConsumer(o.name), storecache.WithLateSyncTimeout(syncTimeout))
	if err != nil {
		return hostResult{}, fmt.Errorf("hosted operator %q: %w", o.name, err)
	}
	cl, err := cachedClient(p, c, o.clientOptions)
	if err != nil {
		return hostResult{}, fmt.Errorf("hosted operator %q: %w", o.name, err)
	}
	appWebhooks := p.Webhooks
	if appWebhooks == nil {
		// Registrations are kept to say why they are not served.
		if appWebhooks, err = lifecycle.NewWebhooks(lifecycle.Config{}); err != nil {
			return hostResult{}, err
		}
	}
	webhooks := appWebhooks.Operator(o.name)
	m := &hostedManager{
		name:       o.name,
		conn:       p.Connection,
		scheme:     p.Scheme,
		cache:      c,
		client:     cl,
		recorders:  p.Recorders,
		log:        logr.New(&namingSink{LogSink: sink, prefix: o.controllerPrefix}),
		webhooks:   webhooks,
		converters: appWebhooks.ConverterRegistry(),
		elected:    make(chan struct{}),
		controllerOptions: config.Controller{
			// Names are checked per app: several apps may share a process.
			SkipNameValidation:      new(true),
			NeedLeaderElection:      new(o.leaderElection),
			MaxConcurrentReconciles: o.maxConcurrent,
			// Controllers start their sources while the app starts, so that
			// their stores sync with every other before any controller runs.
			EnableWarmup:     new(true),
			CacheSyncTimeout: syncTimeout,
		},
	}
	m.controllerOptions.Logger = m.log
	if o.manager != nil {
		c := o.manager.controller
		m.controllerOptions.GroupKindConcurrency = c.GroupKindConcurrency
		m.controllerOptions.RecoverPanic = c.RecoverPanic
		m.controllerOptions.UsePriorityQueue = c.UsePriorityQueue
		m.controllerOptions.ReconciliationTimeout = c.ReconciliationTimeout
	}
	m.runnables = append(m.runnables, electedSignal{m.elected})

	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("hosted operator %q: setup function %s panicked: %v\n%s", o.name, setupName, v, debug.Stack())
		}
	}()
	if err := setup(m); err != nil {
		return hostResult{}, fmt.Errorf("hosted operator %q: setup function %s: %w", o.name, setupName, err)
	}
	m.mu.Lock()
	m.setUp = true
	m.mu.Unlock()
	if err := webhooks.Err(); err != nil {
		return hostResult{}, fmt.Errorf("hosted operator %q: %w", o.name, err)
	}
	if paths := appWebhooks.Paths(); p.Webhooks == nil && len(paths) > 0 {
		return hostResult{}, fmt.Errorf("hosted operator %q registers webhooks %q, but the app has no lifecycle.Module to serve them; build the app with lifecycle.Options", o.name, paths)
	}
	h := &Hosted{name: o.name, controllers: map[string]reconcile.Reconciler{}, info: Info{
		Name: o.name, DeclaredBy: setupName, Writes: slices.Clone(o.writes), NeedsLeader: o.leaderElection,
	}}
	for i, rn := range m.runnables {
		c, ok := rn.(hostedController)
		if !ok {
			continue
		}
		sink, ok := c.GetLogger().GetSink().(*namingSink)
		if !ok || sink.controller == "" {
			continue // a controller with a logger of its own: run, unnamed
		}
		if _, dup := h.controllers[sink.controller]; dup {
			return hostResult{}, fmt.Errorf("hosted operator %q: two controllers are named %q; name them apart with the builder's Named", o.name, sink.controller)
		}
		if o.controllerPrefix != "" {
			if err := rename(c, sink.controller); err != nil {
				return hostResult{}, fmt.Errorf("hosted operator %q: fxcontroller.WithControllerPrefix(%q): %w", o.name, o.controllerPrefix, err)
			}
		}
		h.controllers[sink.controller] = c
		m.runnables[i] = namedController{hostedController: c, operator: o.name, name: sink.controller}
	}
	return hostResult{
		Hosted:    h,
		Runnables: m.runnables,
		Checks:    m.checks,
	}, nil
}

// cachedClient returns controller-runtime's client, reading from c and
// writing through the app's connection, as a manager's GetClient does.
func cachedClient(p hostParams, c crcache.Cache, opts *client.Options) (client.Client, error) {
	o := client.Options{}
	if opts != nil {
		o = *opts
	}
	switch {
	case o.HTTPClient != nil || o.Scheme != nil || o.Mapper != nil:
		return nil, errors.New("client options: HTTPClient, Scheme and Mapper are the app's; leave them unset")
	case o.Cache != nil && o.Cache.Reader != nil:
		return nil, errors.New("client options: Cache.Reader is the hosted operator's cache; leave it unset")
	}
	o.HTTPClient, o.Scheme, o.Mapper = p.Connection.HTTPClient, p.Scheme, p.Connection.Mapper
	cacheOpts := client.CacheOptions{}
	if o.Cache != nil {
		cacheOpts = *o.Cache
	}
	cacheOpts.Reader = c
	o.Cache = &cacheOpts
	newClient := p.Connection.NewClient
	if newClient == nil {
		newClient = client.New
	}
	cl, err := newClient(p.Connection.Config, o)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return cl, nil
}

// hostedManager is the manager.Manager a hosted operator's setup gets.
type hostedManager struct {
	name              string
	conn              *connection.Connection
	scheme            *k8sruntime.Scheme
	cache             crcache.Cache
	client            client.Client
	recorders         RecorderProvider
	log               logr.Logger
	webhooks          *lifecycle.OperatorWebhooks
	converters        conversion.Registry
	controllerOptions config.Controller
	elected           chan struct{}

	dropOnce sync.Once

	mu        sync.Mutex
	setUp     bool // setup has returned: nothing more can be added
	runnables []manager.Runnable
	checks    []lifecycle.Check
}

var _ manager.Manager = (*hostedManager)(nil)

func (m *hostedManager) GetHTTPClient() *http.Client               { return m.conn.HTTPClient }
func (m *hostedManager) GetConfig() *rest.Config                   { return m.conn.Config }
func (m *hostedManager) GetCache() crcache.Cache                   { return m.cache }
func (m *hostedManager) GetScheme() *k8sruntime.Scheme             { return m.scheme }
func (m *hostedManager) GetClient() client.Client                  { return m.client }
func (m *hostedManager) GetFieldIndexer() client.FieldIndexer      { return m.cache }
func (m *hostedManager) GetRESTMapper() meta.RESTMapper            { return m.conn.Mapper }
func (m *hostedManager) GetAPIReader() client.Reader               { return m.conn.Client }
func (m *hostedManager) GetLogger() logr.Logger                    { return m.log }
func (m *hostedManager) GetControllerOptions() config.Controller   { return m.controllerOptions }
func (m *hostedManager) GetWebhookServer() webhook.Server          { return m.webhooks }
func (m *hostedManager) GetConverterRegistry() conversion.Registry { return m.converters }
func (m *hostedManager) Elected() <-chan struct{}                  { return m.elected }

// GetEventRecorder returns the app's events.k8s.io/v1 recorder for name.
func (m *hostedManager) GetEventRecorder(name string) recorder.EventRecorder {
	return m.recorders.GetEventRecorder(name)
}

// GetEventRecorderFor returns a recorder of core/v1 Events for name, the
// deprecated API kubebuilder scaffolds still use.
//
// Deprecated: use GetEventRecorder, as controller-runtime says.
func (m *hostedManager) GetEventRecorderFor(name string) record.EventRecorder {
	if p, ok := m.recorders.(recorder.Provider); ok {
		return p.GetEventRecorderFor(name)
	}
	return droppingRecorder{log: m.log, once: &m.dropOnce}
}

// Add runs r under the app's lifecycle, in the group controller-runtime's
// manager would put it in (see lifecycle.Runnables): a cache or
// cluster with the stores, a server before them, anything else after
// every store has synced, on the leader unless r implements
// manager.LeaderElectionRunnable and says otherwise.
func (m *hostedManager) Add(r manager.Runnable) error {
	if isNil(r) {
		return errors.New("runnable is nil")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.setUp {
		return fmt.Errorf("hosted operator %q: Add after its setup function returned: add runnables in the setup function, while the app is built", m.name)
	}
	m.runnables = append(m.runnables, r)
	return nil
}

// AddHealthzCheck serves check on the app's /healthz.
func (m *hostedManager) AddHealthzCheck(name string, check healthz.Checker) error {
	return m.addCheck(lifecycle.Check{Name: name, Checker: check})
}

// AddReadyzCheck serves check on the app's /readyz.
func (m *hostedManager) AddReadyzCheck(name string, check healthz.Checker) error {
	return m.addCheck(lifecycle.Check{Name: name, Checker: check, Readiness: true})
}

func (m *hostedManager) addCheck(c lifecycle.Check) error {
	if c.Checker == nil {
		return fmt.Errorf("check %q: checker is nil", c.Name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.setUp {
		return fmt.Errorf("hosted operator %q: check %q added after its setup function returned: add checks in the setup function", m.name, c.Name)
	}
	// Named for the operator: operators hosted together may each add a
	// check named as kubebuilder's scaffold names its own ("healthz").
	c.Name = m.name + "/" + c.Name
	m.checks = append(m.checks, c)
	return nil
}

// AddMetricsServerExtraHandler fails: the app's metrics endpoint serves only
// metrics.
func (m *hostedManager) AddMetricsServerExtraHandler(path string, _ http.Handler) error {
	return fmt.Errorf("hosted operator %q: extra handler %q on the metrics server is not supported; serve it from a runnable added with mgr.Add, on an address of its own", m.name, path)
}

// Start fails: the app starts what the manager holds.
func (m *hostedManager) Start(context.Context) error {
	return fmt.Errorf("hosted operator %q: the app starts hosted managers; do not call mgr.Start", m.name)
}

// namingSink passes log lines on to the app's logger and remembers the
// "controller" value controller-runtime gives each controller's logger, so
// that the app can tell hosted controllers by name. With a prefix
// (WithControllerPrefix), it qualifies that value as "<prefix>/<name>".
type namingSink struct {
	logr.LogSink
	controller string
	prefix     string
}

// qualify returns the name of a controller named name by its operator.
func (s *namingSink) qualify(name string) string {
	if s.prefix == "" || strings.HasPrefix(name, s.prefix+"/") {
		return name // the workqueue's logger is given the qualified name
	}
	return s.prefix + "/" + name
}

// rename gives controller-runtime's controller c the name its logs
// already have. The name is the exported field Name of
// controller-runtime's internal controller.Controller, which its metrics
// and workqueue read when the controller starts; nothing has read it
// before. test/TestHostedControllersOfOneName checks that it does.
func rename(c hostedController, name string) error {
	v := reflect.ValueOf(c)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("Name"); f.IsValid() && f.Kind() == reflect.String && f.CanSet() {
			f.SetString(name)
			return nil
		}
	}
	return fmt.Errorf("controller %q is a %T, which has no Name field to set; report this with the controller-runtime version", name, c)
}

var (
	_ logr.CallDepthLogSink = (*namingSink)(nil)
	_ zapr.Underlier        = (*namingSink)(nil)
)

func (s *namingSink) WithValues(kv ...any) logr.LogSink {
	n := &namingSink{controller: s.controller, prefix: s.prefix}
	for i := 0; i+1 < len(kv); i += 2 {
		if k, _ := kv[i].(string); k == "controller" {
			if name, ok := kv[i+1].(string); ok {
				n.controller = s.qualify(name)
				kv = slices.Clone(kv) // the caller's stays as it is
				kv[i+1] = n.controller
			}
		}
	}
	n.LogSink = s.LogSink.WithValues(kv...)
	return n
}

func (s *namingSink) WithName(name string) logr.LogSink {
	return &namingSink{LogSink: s.LogSink.WithName(name), controller: s.controller, prefix: s.prefix}
}

func (s *namingSink) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return &namingSink{LogSink: d.WithCallDepth(depth), controller: s.controller, prefix: s.prefix}
	}
	return s
}

// GetUnderlying returns the zap logger beneath, so that LoggerFrom works in
// hosted reconcilers too.
func (s *namingSink) GetUnderlying() *zap.Logger {
	if u, ok := s.LogSink.(zapr.Underlier); ok {
		return u.GetUnderlying()
	}
	return zap.NewNop()
}

// electedSignal closes elected when the app runs what needs leadership:
// once this replica leads, or at start without leader election.
type electedSignal struct{ elected chan struct{} }

func (e electedSignal) Start(ctx context.Context) error {
	close(e.elected)
	<-ctx.Done()
	return nil
}

func (e electedSignal) NeedLeaderElection() bool { return true }

// droppingRecorder stands in for the core/v1 recorder of a
// RecorderProvider that has none (one that is not a controller-runtime
// recorder.Provider): it drops events, saying so once in the log.
type droppingRecorder struct {
	log  logr.Logger
	once *sync.Once
}

func (r droppingRecorder) Event(k8sruntime.Object, string, string, string) { r.drop() }
func (r droppingRecorder) Eventf(k8sruntime.Object, string, string, string, ...any) {
	r.drop()
}
func (r droppingRecorder) AnnotatedEventf(k8sruntime.Object, map[string]string, string, string, string, ...any) {
	r.drop()
}
func (r droppingRecorder) drop() {
	r.once.Do(func() {
		r.log.Error(nil, "core/v1 events are dropped: the app's RecorderProvider has no GetEventRecorderFor; use mgr.GetEventRecorder")
	})
}
