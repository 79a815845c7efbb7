package fxcontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// State is what a controller is doing.
type State string

const (
	// NotStarted is a controller's state until the app starts it.
	NotStarted State = "not started"
	// Waiting is the state of a controller that waits for its kinds to be
	// served (WhenServed) while one is not.
	Waiting State = "waiting"
	// Starting is the state of a controller whose stores and sources sync.
	Starting State = "starting"
	// Running is the state of a controller that reconciles.
	Running State = "running"
	// Stopped is the state of a controller that has stopped.
	Stopped State = "stopped"
	// Disabled is the state of a controller disabled by name (Switch),
	// until it is enabled.
	Disabled State = "disabled"
)

// states are the states, in the order the state metric lists them.
var states = []State{NotStarted, Waiting, Starting, Running, Stopped, Disabled}

// Why a controller stopped, as fxkube_controller_stops_total's reason.
const (
	stopApp           = "app_stopping"
	stopKindNotServed = "kind_not_served"
	stopDisabled      = "disabled"
	stopError         = "error"
)

// Status is what a controller is doing, for describe, /readyz?verbose and
// metrics.
type Status struct {
	State State
	// WaitingFor names the kinds not served, such as
	// "Widget.example.com/v1", while the controller waits.
	WaitingFor []string
}

// String says what the controller does, as "waiting for kind
// Widget.example.com/v1 to be served".
func (s Status) String() string {
	if s.State == Waiting && len(s.WaitingFor) > 0 {
		return fmt.Sprintf("waiting for kind %s to be served", strings.Join(s.WaitingFor, ", "))
	}
	return string(s.State)
}

// status holds a controller's Status and counts its starts and stops.
type status struct {
	mu      sync.Mutex
	current Status
	starts  int
	stops   map[string]int // by reason
}

// Status returns what the controller is doing.
func (c *Controller) Status() Status {
	c.status.mu.Lock()
	defer c.status.mu.Unlock()
	s := c.status.current
	if s.State == "" {
		s.State = NotStarted
	}
	switch s.State {
	case NotStarted, Waiting, Stopped:
		// Disabled, it will not run: Start says so once it looks.
		if c.switched.isDisabled() {
			return Status{State: Disabled}
		}
	}
	s.WaitingFor = slices.Clone(s.WaitingFor)
	return s
}

// setStatus records s, and reports whether it changed.
func (c *Controller) setStatus(s Status) bool {
	c.status.mu.Lock()
	defer c.status.mu.Unlock()
	if c.status.current.State == s.State && slices.Equal(c.status.current.WaitingFor, s.WaitingFor) {
		return false
	}
	c.status.current = s
	return true
}

// ReadinessNote implements contract.ReadinessNoter: a controller that
// waits for its kinds, or is disabled, says so on /readyz?verbose,
// without failing it.
func (c *Controller) ReadinessNote() string {
	if s := c.Status(); s.State == Waiting || s.State == Disabled {
		return fmt.Sprintf("controller %q is %s", c.name, s)
	}
	return ""
}

// started records that a run of the controller began.
func (c *Controller) started() {
	c.status.mu.Lock()
	c.status.starts++
	c.status.mu.Unlock()
	c.setStatus(Status{State: Running})
	c.Logger().Info("controller started")
}

// stopped records that a run of the controller ended, for reason.
func (c *Controller) stopped(reason string, fields ...zap.Field) {
	c.status.mu.Lock()
	if c.status.stops == nil {
		c.status.stops = make(map[string]int)
	}
	c.status.stops[reason]++
	c.status.mu.Unlock()
	c.setStatus(Status{State: Stopped})
	c.Logger().Info("controller stopped", append([]zap.Field{zap.String("reason", reason)}, fields...)...)
}

// stopReason is why a run that returned err under ctx stopped.
func stopReason(ctx context.Context, err error) string {
	if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		return stopError
	}
	return stopApp
}

var (
	stateDesc = prometheus.NewDesc("fxkube_controller_state",
		"1 for the controller's current state (not started, waiting for its kinds to be served, starting, running, stopped, disabled), else 0.", []string{"controller", "state"}, nil)
	startsDesc = prometheus.NewDesc("fxkube_controller_starts_total",
		"Runs of the controller started.", []string{"controller"}, nil)
	stopsDesc = prometheus.NewDesc("fxkube_controller_stops_total",
		"Runs of the controller stopped, by reason: app_stopping, kind_not_served, disabled, error.", []string{"controller", "reason"}, nil)
)

// Describe implements prometheus.Collector: the app's controllers report
// their state, starts and stops.
func (cs Controllers) Describe(ch chan<- *prometheus.Desc) {
	ch <- stateDesc
	ch <- startsDesc
	ch <- stopsDesc
}

// Collect implements prometheus.Collector.
func (cs Controllers) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		current := c.Status().State
		for _, s := range states {
			v := 0.0
			if s == current {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, v, c.name, string(s))
		}
		c.status.mu.Lock()
		starts := c.status.starts
		stops := map[string]int{stopApp: 0, stopKindNotServed: 0, stopDisabled: 0, stopError: 0}
		for reason, n := range c.status.stops {
			stops[reason] = n
		}
		c.status.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(startsDesc, prometheus.CounterValue, float64(starts), c.name)
		for reason, n := range stops {
			ch <- prometheus.MustNewConstMetric(stopsDesc, prometheus.CounterValue, float64(n), c.name, reason)
		}
	}
}
