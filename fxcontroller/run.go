package fxcontroller

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/fxkube/fxkube/internal/grace"
)

// Start runs the controller until ctx ends: it subscribes to its stores'
// informers, waits for them to sync, and reconciles what they enqueue. When
// ctx ends, Start stops taking requests, waits for the reconciles in flight
// and unsubscribes from the informers before it returns. Under the app's
// lifecycle, the context of a reconcile in flight then ends only once the
// stop timeout has passed (or, with leader election, leadership is lost), so
// that the reconcile can finish its work. Start is called once.
//
// The controller runs while it may: while it is enabled (see Switch) and,
// if it waits for its kinds (WhenServed), while they are served. When one
// of these no longer holds, the run stops as it does when ctx ends, within
// the stop timeout, and its queue is dropped; a controller that waits for
// its kinds gives back its stores. Once they hold again, a new run starts,
// with a new controller-runtime controller: one starts once.
func (c *Controller) Start(ctx context.Context) error {
	if c.startedOnce.Swap(true) {
		return fmt.Errorf("%s: started more than once; a controller starts once, as controller-runtime's do", c)
	}
	if c.served != nil {
		unwatch, err := c.served.watch(c.notify)
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		defer unwatch()
	}
	for {
		end, ok := c.awaitRunnable(ctx)
		if !ok {
			return nil
		}
		reason, err := c.runOnce(ctx)
		if reason == stopDisabled {
			c.setStatus(Status{State: Disabled}) // before Disable returns
		}
		end()
		switch reason {
		case stopDisabled, stopKindNotServed:
		case "":
			if ctx.Err() != nil {
				return nil
			}
			c.Logger().Info("controller's stores cannot start yet; trying again", zap.Error(err), zap.Duration("retryIn", retryServe))
			if !await(ctx, c.changed, retryServe) {
				return nil
			}
		default:
			return err // the stores stop with the app
		}
	}
}

// notify wakes Start to check whether the controller may run.
func (c *Controller) notify() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// unrunnable returns why the controller may not run now, or "": it is
// disabled, or a kind of its is not served (missing names them).
func (c *Controller) unrunnable() (reason string, missing []string) {
	if c.switched.isDisabled() {
		return stopDisabled, nil
	}
	if c.served != nil {
		if missing := c.served.notServed(c.keys()); len(missing) > 0 {
			return stopKindNotServed, missing
		}
	}
	return "", nil
}

// awaitRunnable waits until the controller may run, and marks a run under
// way until end is called; ok is false if ctx ends first. Meanwhile the
// controller's status says why it waits.
func (c *Controller) awaitRunnable(ctx context.Context) (end func(), ok bool) {
	for {
		switch reason, missing := c.unrunnable(); reason {
		case stopDisabled:
			if c.setStatus(Status{State: Disabled}) {
				c.Logger().Info("controller is disabled; it runs once enabled")
			}
		case stopKindNotServed:
			if c.setStatus(Status{State: Waiting, WaitingFor: missing}) {
				c.Logger().Info("controller waits for its kinds to be served", zap.Strings("kinds", missing))
			}
		default:
			if end, ok := c.switched.begin(); ok {
				return end, true
			}
			continue // disabled since
		}
		select {
		case <-c.changed:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// runOnce runs the controller once, until ctx ends or it may no longer run
// (see unrunnable), and returns why it stopped: "" if its stores could not
// start (err says why). A controller that waits for its kinds serves its
// stores first. Stopped because it may no longer run, it takes no more
// work, finishes the reconciles in flight within the stop timeout, drops
// its queue and gives back its stores. Stopped with the app, its stores
// stop with the app's.
func (c *Controller) runOnce(ctx context.Context) (reason string, err error) {
	run, stop, end := grace.Stoppable(ctx)
	defer end()
	ctrl := c.unstarted
	if ctrl == nil {
		if ctrl, err = c.build(); err != nil {
			return stopError, err
		}
		c.unstarted = ctrl
	}
	type ended struct {
		release func()
		ran     bool
		err     error
	}
	done := make(chan ended, 1)
	go func() {
		release := func() {}
		if c.served != nil {
			var err error
			if release, err = c.serveStores(run, c.keys()); err != nil {
				done <- ended{err: err}
				return
			}
		}
		c.started()
		done <- ended{release: release, ran: true, err: c.run(run, ctrl)}
	}()
	for {
		select {
		case e := <-done:
			if !e.ran {
				return "", e.err
			}
			c.unstarted = nil
			reason := stopReason(ctx, e.err)
			c.stopped(reason)
			return reason, e.err
		case <-c.changed:
			reason, missing := c.unrunnable()
			if reason == "" {
				continue
			}
			stop()
			fields := []zap.Field{zap.String("reason", reason)}
			if len(missing) > 0 {
				fields = append(fields, zap.Strings("kinds", missing))
			}
			c.Logger().Info("controller stopping; reconciles in flight finish within the stop timeout", fields...)
			e := <-done
			if !e.ran {
				return reason, nil
			}
			c.unstarted = nil
			e.release()
			c.stopped(reason, append(fields[1:], zap.NamedError("runError", e.err))...)
			return reason, nil
		}
	}
}
