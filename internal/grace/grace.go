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

import "context"

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
