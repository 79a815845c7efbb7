package fxcontroller

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Switch enables and disables the app's controllers by name while it
// runs. --controllers chooses the controllers an app has (Selection);
// Switch stops and starts them afterwards. Collect provides it:
//
//	func newAdmin(sw *fxcontroller.Switch) *admin { return &admin{controllers: sw} }
//
//	err := a.controllers.Disable(ctx, "mirror") // returns once mirror has stopped
//	err = a.controllers.Enable("mirror")        // mirror runs again
//
// A controller disabled:
//
//   - takes no more work, finishes the reconciles in flight within
//     --stop-timeout, and drops its queue;
//   - gives back its stores if it waits for its kinds (WhenServed): each
//     stops unless another controller needs it;
//   - says "disabled" in describe, Status, /readyz?verbose and
//     fxkube_controller_state, without failing readiness.
//
// Enabled again, it runs with a new queue: it reconciles every object of
// its primary store, as at start. A controller that waits for its kinds
// waits for them first, as at start.
//
// The stores of a controller that does not wait for its kinds stay. Its
// constructor asked for them with fxstore.For, and such requests live as
// long as the app: other code of its module may read them, and the
// reconciler holds them for its next run. They stay synced, so the
// controller resumes on warm stores. Give a controller WhenServed to have
// its stores start and stop with its runs.
//
// A name is a controller's, or its module's Go package's, as with
// --controllers: a package's name switches all its controllers. Names of
// hosted operators, of controllers --controllers left out, and unknown
// names fail. Switching a controller to what it is does nothing. A Switch
// is safe for concurrent use.
type Switch struct {
	controllers Controllers
	// known are the names a selection may use, for errors; leftOut the
	// names of controllers and packages the selection left out, and hosted
	// those of hosted operators.
	known, leftOut, hosted []string
	selection              Selection
}

// Disable stops the controllers name names and keeps them stopped until
// Enable. It returns once each has stopped and given back its stores, or
// is enabled again; or, with ctx's error, once ctx ends: the controllers
// still stop.
func (s *Switch) Disable(ctx context.Context, name string) error {
	cs, err := s.lookup("Disable", name)
	if err != nil {
		return err
	}
	var waits []func(context.Context) error
	for _, c := range cs {
		waits = append(waits, c.switched.disable())
		c.notify()
	}
	for _, wait := range waits {
		if err := wait(ctx); err != nil {
			return fmt.Errorf("disable %q: %w; its reconciles in flight finish before it stops", name, err)
		}
	}
	return nil
}

// Enable lets the controllers name names run again. It does not wait for
// them to run: Status says when they do.
func (s *Switch) Enable(name string) error {
	cs, err := s.lookup("Enable", name)
	if err != nil {
		return err
	}
	for _, c := range cs {
		c.switched.enable()
		c.notify()
	}
	return nil
}

// lookup returns the controllers name names, or why there are none, for
// the method call.
func (s *Switch) lookup(call, name string) (Controllers, error) {
	var cs Controllers
	for _, c := range s.controllers {
		if c.name == name || c.module() == name {
			cs = append(cs, c)
		}
	}
	switch {
	case len(cs) > 0:
		return cs, nil
	case slices.Contains(s.hosted, name):
		return nil, fmt.Errorf("fxcontroller.Switch.%s: %q is a hosted operator, which cannot be switched while the app runs; leave it out with --controllers=-%s", call, name, name)
	case slices.Contains(s.leftOut, name):
		return nil, fmt.Errorf("fxcontroller.Switch.%s: --controllers=%s leaves %q out of the app; choose it there to switch it while the app runs", call, s.selection, name)
	}
	return nil, checkKnown("fxcontroller.Switch."+call, []string{name}, s.known)
}

// switched is whether a controller is disabled by name (Switch), and
// whether a run of it is under way, for Disable to wait for its end.
type switched struct {
	mu       sync.Mutex
	disabled bool
	// enabled is closed once the controller is enabled again; running
	// once the run under way has ended. Each is nil when there is none.
	enabled, running chan struct{}
}

// disable marks the controller disabled, and returns what waits for the
// run under way to end.
func (s *switched) disable() (wait func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.disabled {
		s.disabled, s.enabled = true, make(chan struct{})
	}
	enabled, running := s.enabled, s.running
	return func(ctx context.Context) error {
		if running == nil {
			return nil
		}
		select {
		case <-running:
		case <-enabled:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return nil
	}
}

// enable marks the controller enabled.
func (s *switched) enable() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disabled {
		s.disabled = false
		close(s.enabled)
		s.enabled = nil
	}
}

// isDisabled reports whether the controller is disabled.
func (s *switched) isDisabled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disabled
}

// begin marks a run under way, unless the controller is disabled; end
// marks its end.
func (s *switched) begin() (end func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disabled {
		return nil, false
	}
	running := make(chan struct{})
	s.running = running
	return func() {
		s.mu.Lock()
		s.running = nil
		s.mu.Unlock()
		close(running)
	}, true
}
