package lifecycle

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/fx"

	"github.com/fxkube/fxkube/internal/builderr"
)

// Run runs app as a controller-runtime manager's Start does: it starts
// app, blocks until ctx ends, then stops app and returns what went wrong.
// A test suite's
//
//	go func() { err = mgr.Start(ctx) }()
//
// becomes
//
//	go func() { err = lifecycle.Run(ctx, app) }()
//
// Run returns:
//   - app.Err(), if fx.New failed, as the one message of the module that
//     failed (the whole of fx's error is its Unwrap);
//   - the start's error, if the start failed (it rolled back);
//   - nil, if ctx ended while app started: the start was cut short, as an
//     Interrupt cuts it, and rolled back;
//   - once app ran, the error of a runnable, cache or server that failed
//     (which stops app, as it stops a manager), joined with the stop's
//     error, or the stop's error alone.
//
// The stop is bounded by app's stop timeout (see Options) and is not cut
// short by ctx, which has ended by then. Unlike fx's App.Run, Run leaves
// SIGINT and SIGTERM alone; end ctx on them, as ctrl.SetupSignalHandler
// does, to stop on a signal.
func Run(ctx context.Context, app *fx.App) error {
	if err := app.Err(); err != nil {
		return builderr.Readable(err)
	}
	r := &run{ctx: ctx, stopped: make(chan error, 1)}
	// fx does not handle a start context that ends (see Interrupt): the
	// start gets one that does not, and the lifecycle's hook, which finds
	// r in it, stops waiting when ctx ends.
	if err := app.Start(context.WithValue(context.WithoutCancel(ctx), runKey{}, r)); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	var cause error
	select {
	case <-ctx.Done():
	case cause = <-r.stopped:
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), app.StopTimeout())
	defer cancel()
	return errors.Join(cause, app.Stop(stopCtx))
}

// run is what Run tells the lifecycle's hook, through the context of
// fx's App.Start: when to stop starting, and where to say the app failed
// once started. Nothing outside this package sees it.
type run struct {
	ctx     context.Context
	once    sync.Once
	stopped chan error
}

type runKey struct{}

// runOf returns the run ctx carries, or nil.
func runOf(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

// done is closed when Run's context ends; nil (never) without Run.
func (r *run) done() <-chan struct{} {
	if r == nil {
		return nil
	}
	return r.ctx.Done()
}

// failed tells Run the app failed with cause; the first cause wins.
func (r *run) failed(cause error) {
	if r == nil {
		return
	}
	r.once.Do(func() { r.stopped <- cause })
}
