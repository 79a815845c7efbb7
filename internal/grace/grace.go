// Package grace lets work in flight when a runnable is told to stop run on
// until the app's stop bound, rather than end at once.
//
// The app's lifecycle stops a runnable by ending the context it started it
// with, which for a controller also ends the context of every reconcile in
// flight: a reconcile between two writes would fail the second, and leave
// the first half-done. The lifecycle therefore puts a second context, which
// ends when the stop bound has passed, into the runnable's context (With);
// work started under it takes its cancellation from there (Context).
package grace

import (
	"context"
	"sync"
	"time"
)

type key struct{}

// With returns ctx carrying until: work started under ctx may run on until
// until ends, even once ctx has ended.
func With(ctx, until context.Context) context.Context {
	return context.WithValue(ctx, key{}, until)
}

// Context returns the context for one piece of work started under ctx. When
// ctx carries a grace context (see With), the result has ctx's values and
// ends when the grace context ends, not when ctx does; otherwise it is ctx.
// Call cancel once the work is done.
func Context(ctx context.Context) (_ context.Context, cancel context.CancelFunc) {
	until, ok := ctx.Value(key{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	work, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(until, func() { cancelWork(context.Cause(until)) })
	return work, func() {
		stop()
		cancelWork(context.Canceled)
	}
}

type timeoutKey struct{}

// WithStopTimeout returns ctx carrying the app's stop bound, d: how long
// work in flight may run on once a part of a runnable is told to stop
// alone (see Stoppable).
func WithStopTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, timeoutKey{}, d)
}

// defaultStopTimeout is the bound of a ctx that carries none, as
// lifecycle's default --stop-timeout.
const defaultStopTimeout = 30 * time.Second

// Stoppable returns the context of a part of a runnable that may stop
// before the runnable does, such as a controller whose kind is no longer
// served. run ends when ctx does, or once stop is called. Work started
// under run (Context) runs on until ctx's grace context ends or, once
// stop is called, for the stop bound ctx carries (WithStopTimeout). Call
// end once the part has returned: its work is done.
func Stoppable(ctx context.Context) (run context.Context, stop, end func()) {
	until, endGrace := context.WithCancel(context.Background())
	stopOuter := func() bool { return false }
	if outer, ok := ctx.Value(key{}).(context.Context); ok {
		stopOuter = context.AfterFunc(outer, endGrace)
	}
	d, ok := ctx.Value(timeoutKey{}).(time.Duration)
	if !ok {
		d = defaultStopTimeout
	}
	run, cancel := context.WithCancel(With(ctx, until))
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	stop = func() {
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if timer == nil {
			timer = time.AfterFunc(d, endGrace)
		}
	}
	end = func() {
		cancel()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		stopOuter()
		endGrace()
	}
	return run, stop, end
}
