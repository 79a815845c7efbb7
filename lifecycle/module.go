package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/contract"
	"github.com/fxkube/fxkube/internal/grace"
)

// Check is a named health or readiness check served on the app's probe
// endpoints, as a controller-runtime manager's AddHealthzCheck and
// AddReadyzCheck serve theirs: /healthz (or /readyz) fails while any of its
// checks fails, naming it.
type Check struct {
	Name    string
	Checker healthz.Checker
	// Readiness puts the check on /readyz instead of /healthz.
	Readiness bool
}

// Checks adds checks to the app's probe endpoints.
func Checks(checks ...Check) fx.Option {
	opts := make([]fx.Option, len(checks))
	for i, c := range checks {
		opts[i] = fx.Supply(fx.Annotated{Group: contract.ChecksGroup, Target: c})
	}
	return fx.Options(opts...)
}

// Runnables adds runnables to the app, grouped as controller-runtime's
// manager groups what it is given:
//
//   - servers (manager.Server, webhook.Server) serve before any store lists;
//   - caches (cache.Cache, cluster.Cluster) start with the stores, and the
//     start waits for their sync;
//   - the rest, controllers among them, start once every store has synced,
//     on the leader when leader election is on (unless NeedLeaderElection
//     says otherwise), and stop first.
//
// A runnable with a Warmup(ctx) error method, as controller-runtime's
// controllers with EnableWarmup have, is warmed up before the barrier.
// Use manager.RunnableFunc for a function.
func Runnables(runnables ...manager.Runnable) fx.Option {
	opts := make([]fx.Option, len(runnables))
	for i, rn := range runnables {
		opts[i] = fx.Provide(fx.Annotate(func() manager.Runnable { return rn }, fx.ResultTags(`group:"`+contract.RunnablesGroup+`"`)))
	}
	return fx.Options(opts...)
}

// Module runs the app's stores and runnables with fx's lifecycle. It needs
// fxstore.Module in the graph, and takes an optional Config and *zap.Logger.
// Stores are bound to the API server of the app's *connection.Connection
// (or of a *rest.Config, when the graph has no Connection), unless the graph
// holds an fxstore.Source (such as fxstoretest's), which is used instead.
var Module = fx.Module("lifecycle", provideWebhooks, fx.Invoke(register))

var provideWebhooks = fx.Provide(newWebhooks)

// Interrupt is a channel that, closed, cuts the lifecycle's start hook
// short, as the end of its context would: the hook fails and undoes what it did, and fx stops the
// hooks that started before it. Hooks other than the lifecycle's do not see
// it. Supply one (the app package's is closed by SIGINT or SIGTERM, by the
// end of the command's context, and once the start is over) rather than end
// the context given to fx's App.Start, which fx does not handle well: Start
// then returns at once, while the hooks may still be starting, and rolls
// back with the ended context, which runs no OnStop hook (uber-go/fx#1034).
type Interrupt <-chan struct{}

// Options returns Module together with the fx settings an app needs: start
// and stop timeouts that fit cfg (fx's default of 15 seconds is too short to
// sync large stores; fx applies the start timeout in App.Run, through the
// start's context), fx's own events logged through zap, and cfg supplied.
//
// A TLS setting cfg names wrongly (see TLSOptions) fails fx.New, naming
// the flag and the names it takes.
//
// Given last to fx.New, as the app package gives it, it makes the
// lifecycle's start hook the app's last one, so that a start cut short by
// an Interrupt fails in that hook, after the others have started, and fx
// stops those.
func Options(cfg Config) fx.Option {
	full := cfg.withDefaults()
	if _, err := full.serverTLS(); err != nil {
		return fx.Error(err)
	}
	return fx.Options(
		fx.Supply(cfg),
		fx.StartTimeout(full.SyncTimeout+time.Minute),
		fx.StopTimeout(full.StopTimeout+30*time.Second),
		fx.WithLogger(func(p loggerParams) fxevent.Logger {
			// fx's events (each constructor provided, each hook run) are
			// debug detail. So are its errors: they are what App.Err and
			// App.Start return, which the app reports once; logged here
			// too, a failed start would be told three times more.
			l := &fxevent.ZapLogger{Logger: orNop(p.Logger).Named("fx")}
			l.UseLogLevel(zapcore.DebugLevel)
			l.UseErrorLevel(zapcore.DebugLevel)
			return l
		}),
		fx.Module("lifecycle", provideWebhooks),
		// At the root, not in the module: fx runs a module's invokes
		// before its parent's, so this one runs after those of the
		// modules and root options given before it.
		fx.Invoke(register),
	)
}

type loggerParams struct {
	fx.In

	Logger *zap.Logger `optional:"true"`
}

func orNop(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	return l
}

// params are what Module needs from the graph.
type params struct {
	fx.In

	Config     Config                 `optional:"true"`
	Connection *connection.Connection `optional:"true"`
	RestConfig *rest.Config           `optional:"true"`
	Source     fxstore.Source         `optional:"true"`
	Scheme     *k8sruntime.Scheme
	Registry   *fxstore.Registry
	Logger     *zap.Logger                `optional:"true"`
	Runnables  []manager.Runnable         `group:"fxkube.runnables"`
	Checks     []Check                    `group:"fxkube.checks"`
	NonGating  []contract.NonGatingChecks `group:"fxkube.non-gating-checks"`
	Webhooks   *Webhooks
	Lifecycle  fx.Lifecycle
	Shutdowner fx.Shutdowner
	Interrupt  Interrupt `optional:"true"`
}

func register(p params) {
	r := &runner{
		cfg:        p.Config.withDefaults(),
		conn:       p.Connection,
		rest:       p.RestConfig,
		source:     p.Source,
		scheme:     p.Scheme,
		registry:   p.Registry,
		log:        orNop(p.Logger).Named("lifecycle"),
		runnables:  groupRunnables(p.Runnables),
		checks:     append(slices.Clone(p.Checks), Check{Name: "webhooks", Checker: p.Webhooks.StartedChecker(), Readiness: true}),
		nonGating:  p.NonGating,
		webhooks:   p.Webhooks,
		shutdowner: p.Shutdowner,
		interrupt:  p.Interrupt,
	}
	p.Lifecycle.Append(fx.Hook{OnStart: r.start, OnStop: r.stop})
}

// runner carries out the start and stop contract.
type runner struct {
	cfg        Config
	conn       *connection.Connection // nil until connect, without one in the graph
	rest       *rest.Config
	source     fxstore.Source
	scheme     *k8sruntime.Scheme
	registry   *fxstore.Registry
	log        *zap.Logger
	runnables  runnables
	checks     []Check
	nonGating  []contract.NonGatingChecks
	webhooks   *Webhooks
	shutdowner fx.Shutdowner
	interrupt  Interrupt // nil without one
	run        *run      // nil unless started by Run

	state atomic.Value // a state
	// toldFailing holds the store failures logged by failingStores.
	toldFailing sync.Map
	servers     *servers
	// metricsRegistered is whether the registry's metrics are this app's
	// in controller-runtime's registry (another app's may be there).
	metricsRegistered bool

	// runCtx is the context of every runnable; stop cancels it. Work in
	// flight then runs on until endGrace (see internal/grace), which stop
	// calls once the runnables have returned or the stop timeout has passed.
	runCtx    context.Context
	cancelRun context.CancelFunc
	graceCtx  context.Context
	endGrace  context.CancelFunc

	mu            sync.Mutex // guards stopping and runnablesDone.Go
	stopping      bool
	runnablesDone sync.WaitGroup
	warmupsDone   sync.WaitGroup

	// cacheCtx is the context of the caches group, ended once the
	// runnables have returned.
	cacheCtx     context.Context
	cancelCaches context.CancelFunc
	cachesDone   sync.WaitGroup

	stopElection context.CancelFunc
	electionDone chan struct{}
}

// state is what /readyz reports.
type state string

const (
	starting state = "starting"
	ready    state = "ready"
	standby  state = "standby: synced, waiting for leadership"
	stopping state = "stopping"
)

func (r *runner) start(ctx context.Context) (err error) {
	r.state.Store(starting)
	r.run = runOf(ctx)
	if r.interrupt != nil || r.run != nil {
		// The Interrupt, or the end of Run's context, ends what the start
		// waits for, as ctx does.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-r.interrupt: // never, when nil
				cancel()
			case <-r.run.done(): // never, without Run
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	if err := r.cutShort(ctx); err != nil {
		return err
	}
	if r.cfg.LeaderElection.Enabled {
		if err := r.resolveLease(); err != nil {
			return err
		}
	}
	begin := time.Now()
	if r.servers, err = r.serve(ctx); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if r.cancelRun != nil {
				// Only warm-ups run yet, and they end with their context.
				r.endRunnables(context.Background())
			}
			r.rollback()
		}
	}()
	if err := metrics.Registry.Register(r.registry); err != nil {
		r.log.Warn("store metrics not registered; is another app running in this process?", zap.Error(err))
	} else {
		r.metricsRegistered = true
	}
	// Webhooks serve before any store lists: conversion webhooks may be
	// what a store's initial list waits for.
	if err := r.servers.serveWebhooks(ctx, r.webhooks); err != nil {
		return err
	}
	// So do the servers modules add as runnables (an operator's own
	// webhook server), as controller-runtime's manager starts them.
	for _, rn := range r.runnables.servers {
		if err := r.servers.serveRunnable(ctx, rn); err != nil {
			return err
		}
	}
	src, err := r.storeSource()
	if err != nil {
		return err
	}
	if err := r.registry.Start(ctx, src); err != nil {
		return fmt.Errorf("start stores:\n%w", err)
	}
	r.graceCtx, r.endGrace = context.WithCancel(context.Background())
	r.runCtx, r.cancelRun = context.WithCancel(grace.WithStopTimeout(grace.With(context.Background(), r.graceCtx), r.cfg.StopTimeout))
	r.cacheCtx, r.cancelCaches = context.WithCancel(context.Background())
	var errs startErrors
	r.startCaches(&errs)
	r.warmUp(&errs)
	if err := r.barrier(ctx, &errs); err != nil {
		return err
	}
	errs.end()
	r.log.Info("all stores synced", zap.Int("stores", len(r.registry.Stores())), zap.Duration("took", time.Since(begin)))
	// The last point to turn back: from here on, the app runs.
	if err := r.cutShort(ctx); err != nil {
		return err
	}
	if r.cfg.LeaderElection.Enabled {
		if err := r.elect(); err != nil {
			return err
		}
		r.startRunnables(r.runCtx, false)
		r.state.Store(standby)
		return nil
	}
	r.startRunnables(r.runCtx, true)
	r.state.Store(ready)
	return nil
}

// barrier waits until every store and cache has synced and every warm-up
// is done, bounded by the sync timeout, and returns the errors they
// reported.
func (r *runner) barrier(ctx context.Context, errs *startErrors) error {
	syncCtx, cancel := context.WithTimeout(ctx, r.cfg.SyncTimeout)
	defer cancel()
	err := r.registry.WaitForSync(syncCtx)
	timedOut := err != nil && ctx.Err() == nil && syncCtx.Err() != nil
	if timedOut {
		// A hosted controller's warm-up times out as the barrier does
		// (its CacheSyncTimeout), naming the source it waited for: give
		// the warm-ups a moment to say so, then tell what is still
		// not done. syncCtx has ended: WaitForSync returns at once.
		r.awaitWarmups(warmupReportTimeout)
		err = r.registry.WaitForSync(syncCtx)
	}
	switch {
	case err == nil:
		return errs.err()
	case !timedOut:
		return fmt.Errorf("sync stores:\n%w", errors.Join(err, errs.err()))
	}
	what := "stores did not sync"
	if r.storesSynced() {
		what = "the start did not finish"
	}
	return fmt.Errorf("%s within the sync timeout of %s (raise it with --sync-timeout):\n%w", what, r.cfg.SyncTimeout, errors.Join(err, errs.err()))
}

// warmupReportTimeout bounds the wait for warm-ups to report once the
// barrier has timed out.
const warmupReportTimeout = 2 * time.Second

func (r *runner) storesSynced() bool {
	for _, s := range r.registry.Stores() {
		if !s.Status.Synced {
			return false
		}
	}
	return true
}

// cutShort returns why the start must end here: ctx has ended, or the
// Interrupt is closed (which ends ctx too, an instant later).
func (r *runner) cutShort(ctx context.Context) error {
	select {
	case <-r.interrupt: // never, when nil
		return fmt.Errorf("start interrupted: %w", context.Canceled)
	case <-r.run.done(): // never, without Run
		return fmt.Errorf("start interrupted: %w", context.Canceled)
	default:
		return ctx.Err()
	}
}

func (r *runner) storeSource() (fxstore.Source, error) {
	if r.source != nil {
		return r.source, nil
	}
	conn, err := r.connect()
	if err != nil {
		return nil, err
	}
	return apiserver.NewSource(conn.Client, apiserver.WithREST(conn.Config, conn.HTTPClient)), nil
}

// connect returns the app's connection to its API server.
func (r *runner) connect() (*connection.Connection, error) {
	if r.conn != nil {
		return r.conn, nil
	}
	if r.rest == nil {
		return nil, errors.New("no *rest.Config in the app to connect to an API server; supply one, or an fxstore.Source")
	}
	conn, err := connection.New(r.rest, r.scheme)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	r.conn = conn
	return conn, nil
}

// rollback undoes a start that failed part way.
func (r *runner) rollback() {
	r.registry.Stop()
	if r.metricsRegistered {
		metrics.Registry.Unregister(r.registry)
	}
	r.servers.close(context.Background())
}

// shutdown stops the app, which failed with cause after it started: Run
// returns cause, and fx's Wait gets exit code 1.
func (r *runner) shutdown(cause error) {
	r.run.failed(cause)
	if err := r.shutdowner.Shutdown(fx.ExitCode(1)); err != nil {
		r.log.Error("cannot stop the app", zap.Error(err))
	}
}

func (r *runner) stop(ctx context.Context) error {
	r.state.Store(stopping)
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()

	if r.cancelRun != nil {
		r.endRunnables(ctx)
	}
	if r.stopElection != nil {
		r.stopElection()
		select {
		case <-r.electionDone:
		case <-ctx.Done():
		}
	}
	r.rollback()
	r.log.Info("stopped")
	_ = r.log.Sync()
	return nil
}

// failingStores names the stores whose list/watch has failed for longer
// than the store failure timeout.
func (r *runner) failingStores() error {
	if r.cfg.StoreFailureTimeout < 0 {
		return nil
	}
	var errs []error
	for _, s := range r.registry.Stores() {
		since := s.Status.FailingSince
		if since.IsZero() || time.Since(since) <= r.cfg.StoreFailureTimeout {
			continue
		}
		errs = append(errs, s.Err())
		// The probe withholds the reason: log it, once per failure.
		if _, told := r.toldFailing.LoadOrStore(s.Key.String()+"@"+since.String(), true); !told {
			r.log.Error("store failing for longer than the store failure timeout; /readyz fails until it works again",
				zap.Stringer("store", s.Key), zap.Time("since", since), zap.NamedError("lastError", s.Status.LastError),
				zap.Duration("storeFailureTimeout", r.cfg.StoreFailureTimeout))
		}
	}
	return errors.Join(errs...)
}

// readiness is the app's own readiness, as named /readyz checks: "stores"
// passes once every store has synced at start, and while none has failed
// for longer than the store failure timeout; "runnables" while the
// runnables run (on a standby, those that need no leadership) and stop has
// not begun.
func (r *runner) readiness() []Check {
	current := func() state {
		if s, _ := r.state.Load().(state); s != "" {
			return s
		}
		return starting
	}
	return []Check{
		{Name: "stores", Readiness: true, Checker: func(*http.Request) error {
			if current() == starting {
				return errors.New("not synced yet")
			}
			return r.failingStores()
		}},
		{Name: "runnables", Readiness: true, Checker: func(*http.Request) error {
			switch s := current(); s {
			case ready, standby:
				return nil
			default:
				return errors.New(string(s))
			}
		}},
	}
}
