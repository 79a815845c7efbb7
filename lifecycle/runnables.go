package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/contract"
	"github.com/fxkube/fxkube/internal/storehooks"
)

// storeHooks are what fxstore's registry does for lifecycle and not for users.
var storeHooks = storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec, fxstore.Option]()

// runnables are the app's runnables, grouped by when they start, as
// controller-runtime's manager groups what it is given
// (pkg/manager/runnable_group.go).
type runnables struct {
	// servers serve before any store lists, with the app's own servers:
	// HTTP servers that need no leader (manager.Server) and webhook
	// servers (webhook.Server). A conversion webhook may be what a store's
	// list waits for.
	servers []manager.Runnable
	// caches start with the stores, before warm-ups, and the start waits
	// for their sync as it does for the stores': anything with a cache of
	// its own (a cache.Cache, a cluster.Cluster, anything with GetCache).
	// A controller's warm-up may wait for one of them.
	caches []manager.Runnable
	// others start once every store and cache has synced and every
	// warm-up is done: on every replica, or on the leader
	// (manager.LeaderElectionRunnable). Controllers are among them.
	others []manager.Runnable
}

// hasCache is a runnable that runs a cache, as controller-runtime's
// manager tells one (a cluster.Cluster is).
type hasCache interface {
	GetCache() crcache.Cache
}

func groupRunnables(rns []manager.Runnable) runnables {
	var g runnables
	for _, rn := range rns {
		switch rn := rn.(type) {
		case *manager.Server:
			if rn.NeedLeaderElection() {
				g.others = append(g.others, rn)
			} else {
				g.servers = append(g.servers, rn)
			}
		case hasCache, crcache.Cache:
			g.caches = append(g.caches, rn)
		case webhook.Server:
			g.servers = append(g.servers, rn)
		default:
			g.others = append(g.others, rn)
		}
	}
	return g
}

// cacheOf returns the cache a runnable of the caches group runs.
func cacheOf(rn manager.Runnable) crcache.Cache {
	if c, ok := rn.(hasCache); ok {
		return c.GetCache()
	}
	return rn.(crcache.Cache)
}

// startErrors collects the errors runnables report while the app starts.
type startErrors struct {
	mu   sync.Mutex
	errs []error
	over bool
}

// add records err and reports true while the start is not over.
func (e *startErrors) add(err error) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.over {
		return false
	}
	e.errs = append(e.errs, err)
	return true
}

func (e *startErrors) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return errors.Join(e.errs...)
}

// end reports that the start is over: add reports false from now on.
func (e *startErrors) end() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.over = true
}

// startCaches starts the caches group on the caches' context. Each holds
// back the registry's sync (a Delay) until it has synced. A cache that
// fails while the app starts fails the start; later, it stops the app.
func (r *runner) startCaches(errs *startErrors) {
	for _, rn := range r.runnables.caches {
		name := describe(rn)
		release := storeHooks.Delay(r.registry, fmt.Sprintf("cache %s: syncing", name))
		r.cachesDone.Go(func() {
			if cacheOf(rn).WaitForCacheSync(r.cacheCtx) {
				release()
			}
		})
		r.cachesDone.Go(func() {
			err := rn.Start(r.cacheCtx)
			if err == nil || r.cacheCtx.Err() != nil {
				return
			}
			if errs.add(fmt.Errorf("run cache %s: %w", name, err)) {
				release() // the start fails with err
				return
			}
			r.log.Error("cache failed; stopping the app", zap.Stringer("cache", name), zap.Error(err))
			r.shutdown(fmt.Errorf("cache %s: %w", name, err))
		})
	}
}

// warmUp warms up, in the background, the runnables that implement
// contract.WarmupRunnable, such as hosted controller-runtime controllers, which ask
// for their stores only as they start their sources: each holds back the
// registry's sync (a Delay) until it is done. Their errors go to errs.
func (r *runner) warmUp(errs *startErrors) {
	for _, rn := range r.runnables.others {
		w, ok := rn.(contract.WarmupRunnable)
		if !ok {
			continue
		}
		release := storeHooks.Delay(r.registry, fmt.Sprintf("%s: warming up", describe(rn)))
		r.warmupsDone.Add(1)
		r.runnablesDone.Go(func() {
			defer r.warmupsDone.Done()
			defer release()
			if err := w.Warmup(r.runCtx); err != nil && r.runCtx.Err() == nil {
				errs.add(fmt.Errorf("warm up %s: %w", describe(rn), err))
			}
		})
	}
}

// awaitWarmups waits until every warm-up has returned, for at most d.
func (r *runner) awaitWarmups(d time.Duration) {
	done := make(chan struct{})
	go func() { r.warmupsDone.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// endRunnables ends the runnables' context (and the warm-ups') and waits
// until they have returned, for at most the stop timeout or until ctx
// ends; past that bound, work still in flight is told to stop (its grace
// ends). The caches stop then, once the runnables that read them have.
func (r *runner) endRunnables(ctx context.Context) {
	r.cancelRun()
	all := make(chan struct{})
	go func() { r.runnablesDone.Wait(); close(all) }()
	timeout := time.NewTimer(r.cfg.StopTimeout)
	defer timeout.Stop()
	select {
	case <-all:
	case <-timeout.C:
		r.log.Warn("runnables did not finish within the stop timeout; stopping anyway", zap.Duration("stopTimeout", r.cfg.StopTimeout))
	case <-ctx.Done():
	}
	r.endGrace()
	r.cancelCaches()
	r.cachesDone.Wait()
}

// startRunnables starts, with ctx, the runnables that need leadership
// (leader) or those that do not (!leader). Without leader election, leader
// means all of them. It reports false, starting nothing, once the app is
// stopping.
func (r *runner) startRunnables(ctx context.Context, leader bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return false
	}
	n := 0
	for _, rn := range r.runnables.others {
		if r.cfg.LeaderElection.Enabled && needsLeader(rn) != leader {
			continue
		}
		n++
		r.runnablesDone.Go(func() {
			if err := rn.Start(ctx); err != nil && ctx.Err() == nil {
				r.log.Error("runnable failed; stopping the app", zap.Stringer("runnable", describe(rn)), zap.Error(err))
				r.shutdown(fmt.Errorf("runnable %s: %w", describe(rn), err))
			}
		})
	}
	r.log.Info("runnables started", zap.Int("runnables", n), zap.Bool("leader", leader))
	return true
}

func needsLeader(rn manager.Runnable) bool {
	if l, ok := rn.(manager.LeaderElectionRunnable); ok {
		return l.NeedLeaderElection()
	}
	return true
}

// describe names a runnable in logs.
func describe(rn manager.Runnable) fmt.Stringer {
	if s, ok := rn.(fmt.Stringer); ok {
		return s
	}
	return stringer(fmt.Sprintf("%T", rn))
}

type stringer string

func (s stringer) String() string { return string(s) }

// readinessNotes are what the runnables tell on /readyz?verbose without
// failing it (contract.ReadinessNoter), sorted.
func (r *runner) readinessNotes() []string {
	var notes []string
	for _, rn := range r.runnables.others {
		if n, ok := rn.(contract.ReadinessNoter); ok {
			if note := n.ReadinessNote(); note != "" {
				notes = append(notes, note)
			}
		}
	}
	slices.Sort(notes)
	return notes
}
