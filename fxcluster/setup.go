package fxcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fxkube/fxkube/internal/contract"
	"github.com/fxkube/fxkube/internal/grace"
)

// MemberSetup sets up work in one member cluster, c, as it joins: it asks
// for its stores in c.Stores() with fxstore.For, as a constructor does in
// the app's own cluster, and returns the runnables that do the work.
// It does no I/O.
//
// The member's start barrier covers the runnables: each one's warm-up
// (controller-runtime's Warmup, when it has one) runs, and the member's
// stores sync, before any of them starts. They start once the member has
// joined; those that need leader election (manager.LeaderElectionRunnable,
// true unless they say otherwise) once the app leads too. Their context
// ends as the member leaves, and work in flight gets the stop timeout.
type MemberSetup func(c *Cluster) ([]manager.Runnable, error)

// InEveryMember runs setup in every member cluster that joins. Call it
// while the app is built, in a constructor or an fx.Invoke:
// fxcontroller.SetupWithManager uses it to host an operator in every
// member.
func (f *Fleet) InEveryMember(name string, setup MemberSetup) error {
	if setup == nil {
		return fmt.Errorf("%s in every member cluster: setup is nil", name)
	}
	if err := f.declare(&memberWork{name: name, setup: setup, runs: make(map[*member]*memberRun)}); err != nil {
		return fmt.Errorf("%s in every member cluster: %w", name, err)
	}
	return nil
}

// memberWork is what a MemberSetup set up in each member.
type memberWork struct {
	name  string
	setup MemberSetup

	mu   sync.Mutex
	runs map[*member]*memberRun
}

// memberRun is the work of one member: its runnables, their context, from
// their warm-up until the member leaves, and their goroutines.
type memberRun struct {
	runnables []manager.Runnable
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func (w *memberWork) declare(m *member) error {
	rns, err := w.setup(m.cluster())
	if err != nil {
		return fmt.Errorf("set up %s in cluster %q: %w", w.name, m.name, err)
	}
	for _, rn := range rns {
		if rn == nil {
			return fmt.Errorf("set up %s in cluster %q: a runnable is nil", w.name, m.name)
		}
	}
	ctx, cancel := context.WithCancel(grace.With(m.ctx, m.hardStop))
	w.mu.Lock()
	w.runs[m] = &memberRun{runnables: rns, ctx: ctx, cancel: cancel}
	w.mu.Unlock()
	return nil
}

// forget stops what runs of the work in m, and waits for it.
func (w *memberWork) forget(m *member) {
	w.mu.Lock()
	run := w.runs[m]
	delete(w.runs, m)
	w.mu.Unlock()
	if run != nil {
		run.cancel()
		run.wg.Wait()
	}
}

func (w *memberWork) run(m *member) *memberRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runs[m]
}

// warmUp runs the warm-ups of the work's runnables in m, at once, and
// waits until each returns or syncCtx ends. The warm-ups run on the
// work's context: what they start, such as a controller's sources, runs
// until the member leaves.
func (w *memberWork) warmUp(syncCtx context.Context, m *member) error {
	run := w.run(m)
	errs := make([]error, len(run.runnables))
	var warm sync.WaitGroup
	for i, rn := range run.runnables {
		wr, ok := rn.(contract.WarmupRunnable)
		if !ok {
			continue
		}
		warm.Add(1)
		run.wg.Go(func() {
			defer warm.Done()
			if err := wr.Warmup(run.ctx); err != nil {
				errs[i] = fmt.Errorf("warm up %s in cluster %q: %w", w.name, m.name, err)
			}
		})
	}
	done := make(chan struct{})
	go func() { warm.Wait(); close(done) }()
	select {
	case <-done:
		return errors.Join(errs...)
	case <-syncCtx.Done():
		return fmt.Errorf("warm up %s in cluster %q: %w", w.name, m.name, context.Cause(syncCtx))
	}
}

// engage starts the work's runnables in m, which has joined. Disengaging
// ends their context and waits for them: once the stop timeout has
// passed, their work in flight is told to stop.
func (w *memberWork) engage(m *member) (func(), error) {
	run := w.run(m)
	var started sync.WaitGroup
	for _, rn := range run.runnables {
		started.Add(1)
		run.wg.Go(func() {
			defer started.Done()
			if needsLeader(rn) {
				select {
				case <-m.fleet.elected:
				case <-run.ctx.Done():
					return
				}
			}
			if err := rn.Start(run.ctx); err != nil && run.ctx.Err() == nil {
				m.log.Error("runnable failed in the cluster; it runs no more there", zap.String("work", w.name), zap.Error(err))
			}
		})
	}
	return func() {
		run.cancel()
		done := make(chan struct{})
		go func() { started.Wait(); close(done) }()
		timer := time.NewTimer(m.fleet.opts.StopTimeout)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			m.endHard(errLeft)
			<-done
		}
	}, nil
}

// needsLeader reports whether rn runs only on the leader, as the app's
// lifecycle decides it.
func needsLeader(rn manager.Runnable) bool {
	if l, ok := rn.(manager.LeaderElectionRunnable); ok {
		return l.NeedLeaderElection()
	}
	return true
}

// elected closes the fleet's elected channel once the member work may
// begin: the lifecycle starts it on the leader, or on every replica when
// the fleet shares its members out (NeedLeaderElection).
type elected struct{ f *Fleet }

func (e elected) Start(ctx context.Context) error {
	e.f.electedOnce.Do(func() { close(e.f.elected) })
	<-ctx.Done()
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: on the
// leader, unless every replica runs its own members' work.
func (e elected) NeedLeaderElection() bool { return e.f.leaderOnly() }

func (elected) String() string { return "fxcluster's leadership signal" }
