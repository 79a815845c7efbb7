package fxcontroller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/caller"
)

// Module runs the app's controllers and gives reconcilers what they act
// with. It provides:
//
//   - a controller-runtime client.Client for writes and direct reads, the
//     app's connection.Connection's client, talking to the API server the
//     app's *rest.Config points at;
//   - a RecorderProvider whose recorders send events.k8s.io/v1 Events there;
//   - Controllers, every controller declared with Provide, which it also
//     hands to the app's lifecycle (see Collect);
//   - a *Switch, which enables and disables them by name while the app
//     runs.
//
// It includes connection.Module, so it needs a *rest.Config and
// fxstore.Module's *runtime.Scheme, and it uses the app's *zap.Logger if
// there is one. Constructing it does no I/O.
var Module = fx.Module("fxcontroller",
	Collect,
	connection.Module,
	fx.Provide(newClient, newRecorderProvider),
)

// Collect gathers the controllers declared with Provide: it fails fx.New if
// two share a name, gives each the app's *zap.Logger (unless it has
// WithLogger), provides them as Controllers, and a *Switch of them, and
// hands them to the app's lifecycle as manager.Runnables, in the
// "fxkube.runnables" value group.
// Module includes it; use it alone to run controllers with a client.Client and
// a RecorderProvider of your own, as fxcontrollertest does.
var Collect = fx.Options(
	fx.Provide(collect),
	// Build every controller in fx.New, so bad and duplicate controllers
	// fail there even when nothing runs them.
	fx.Invoke(registerMetrics),
)

// registerMetrics serves the controllers' metrics (see Controllers'
// Collect) in controller-runtime's registry, which /metrics serves, while
// the app runs.
func registerMetrics(lc fx.Lifecycle, cs Controllers, p metricsParams) {
	log := p.Logger
	if log == nil {
		log = zap.NewNop()
	}
	registered := false
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			if err := metrics.Registry.Register(cs); err != nil {
				log.Warn("controller metrics not registered; is another app running in this process?", zap.Error(err))
				return nil
			}
			registered = true
			return nil
		},
		OnStop: func(context.Context) error {
			if registered {
				metrics.Registry.Unregister(cs)
			}
			return nil
		},
	})
}

type metricsParams struct {
	fx.In

	Logger *zap.Logger `optional:"true"`
}

// controllersGroup is the value group of the controllers Provide declares.
const controllersGroup = "fxcontroller.controllers"

// Provide declares a controller of the app. constructor is an fx constructor
// returning a *Controller, or a *Controller and an error; it may take
// anything in the app's graph, such as the *fxstore.Registry, a client.Client
// and a RecorderProvider:
//
//	var Module = fx.Module("rollout", fxcontroller.Provide(newController))
//
//	func newController(stores *fxstore.Registry, c client.Client) (*fxcontroller.Controller, error) {
//		deployments, err := fxstore.For[*appsv1.Deployment](stores, fxstore.Spec{})
//		if err != nil {
//			return nil, err
//		}
//		return fxcontroller.New("rollout", deployments, &reconciler{client: c})
//	}
//
// The app's lifecycle starts the controller once every store has synced (and,
// with leader election, once it leads), and stops it before the stores.
func Provide(constructor any) fx.Option {
	if err := checkConstructor(constructor); err != nil {
		return fx.Error(fmt.Errorf("fxcontroller.Provide(%s): %w", caller.Of(constructor), err))
	}
	return fx.Provide(fx.Annotate(constructor, fx.ResultTags(`group:"`+controllersGroup+`"`)))
}

var (
	controllerType = reflect.TypeFor[*Controller]()
	errorType      = reflect.TypeFor[error]()
)

func checkConstructor(constructor any) error {
	t := reflect.TypeOf(constructor)
	if t == nil || t.Kind() != reflect.Func {
		return fmt.Errorf("got %T; want a function returning *fxcontroller.Controller", constructor)
	}
	switch {
	case t.NumOut() == 1 && t.Out(0) == controllerType:
	case t.NumOut() == 2 && t.Out(0) == controllerType && t.Out(1) == errorType:
	default:
		return fmt.Errorf("returns %s; want *fxcontroller.Controller, or *fxcontroller.Controller and error", results(t))
	}
	return nil
}

func results(t reflect.Type) string {
	out := make([]string, t.NumOut())
	for i := range out {
		out[i] = t.Out(i).String()
	}
	return "(" + strings.Join(out, ", ") + ")"
}

// Controllers are the app's controllers, sorted by name. Collect provides
// them.
type Controllers []*Controller

type collectParams struct {
	fx.In

	Selection   Selection         `optional:"true"`
	Registry    *fxstore.Registry `optional:"true"`
	Controllers []*Controller     `group:"fxcontroller.controllers"`
	Hosted      []*Hosted         `group:"fxcontroller.hosted"`
	Logger      *zap.Logger       `optional:"true"`
}

// HostedOperators are the app's operators hosted with SetupWithManager,
// sorted by name. Collect provides them.
type HostedOperators []*Hosted

type collectResult struct {
	fx.Out

	Controllers Controllers
	Hosted      HostedOperators
	Switch      *Switch
	// The value group contract.RunnablesGroup, which the app's lifecycle
	// starts.
	Runnables []manager.Runnable `group:"fxkube.runnables,flatten"`
}

func collect(p collectParams) (collectResult, error) {
	cs := slices.Clone(p.Controllers)
	var errs []error
	cs = slices.DeleteFunc(cs, func(c *Controller) bool {
		if c == nil {
			errs = append(errs, errors.New("a constructor given to fxcontroller.Provide returned a nil *Controller and no error"))
		}
		return c == nil
	})
	slices.SortFunc(cs, func(a, b *Controller) int {
		return strings.Compare(a.name+"\x00"+a.declaredBy, b.name+"\x00"+b.declaredBy)
	})
	for i := 1; i < len(cs); i++ {
		if a, b := cs[i-1], cs[i]; a.name == b.name {
			errs = append(errs, fmt.Errorf("controller name %q is used by both %s and %s; give each controller of the app its own name",
				a.name, a.declaredBy, b.declaredBy))
		}
	}
	hosted := slices.SortedFunc(slices.Values(p.Hosted), func(a, b *Hosted) int { return strings.Compare(a.name, b.name) })
	// The selection names controllers and hosted operators the app has,
	// whether it leaves them out or not.
	var known []string
	for _, c := range cs {
		known = append(known, c.name, c.module())
	}
	for _, h := range hosted {
		known = append(known, h.name)
	}
	if err := p.Selection.check(known); err != nil {
		errs = append(errs, err)
	}
	// A controller left out gives back what its constructor asked for,
	// unless a controller that runs was declared by the same function.
	// The consumers a controller's requests are made under: its name, or
	// its constructor's, fxstore's default.
	running := map[string]bool{}
	for _, c := range cs {
		if p.Selection.Enabled(c.name, c.module()) {
			running[c.name], running[c.declaredBy] = true, true
		}
	}
	var leftOut []string
	cs = slices.DeleteFunc(cs, func(c *Controller) bool {
		if p.Selection.Enabled(c.name, c.module()) {
			return false
		}
		leftOut = append(leftOut, c.name, c.module())
		for _, consumer := range []string{c.name, c.declaredBy} {
			if p.Registry != nil && !running[consumer] {
				storeHooks.ReleaseConsumer(p.Registry, consumer)
				running[consumer] = true // once
			}
		}
		return true
	})
	sw := &Switch{controllers: cs, known: known, leftOut: leftOut, selection: p.Selection}
	for _, h := range hosted {
		sw.hosted = append(sw.hosted, h.name)
	}
	hosted = slices.DeleteFunc(hosted, func(h *Hosted) bool { return h.disabled })
	// Hosted controllers' names are unique in the app too, as
	// controller-runtime's manager requires of its own.
	names := map[string]string{}
	for _, c := range cs {
		names[c.name] = c.declaredBy
	}
	for _, h := range hosted {
		for _, name := range h.Controllers() {
			if by, ok := names[name]; ok {
				errs = append(errs, fmt.Errorf("controller name %q is used by both %s and hosted operator %q; give each controller of the app its own name: host the operator with fxcontroller.WithControllerPrefix(%q) to name it %q",
					name, by, h.name, h.name, h.name+"/"+name))
			}
			names[name] = fmt.Sprintf("hosted operator %q", h.name)
		}
	}
	for i := 1; i < len(hosted); i++ {
		if a, b := hosted[i-1], hosted[i]; a.name == b.name {
			errs = append(errs, fmt.Errorf("hosted operator name %q is used by both %s and %s; name them apart with fxcontroller.WithName",
				a.name, a.info.DeclaredBy, b.info.DeclaredBy))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return collectResult{}, err
	}
	if consumers := waitingConsumers(cs); len(consumers) > 0 && p.Registry != nil {
		// Controllers that wait for their kinds learn which are served
		// from the app's CRDs.
		served, err := newServedKinds(p.Registry)
		if err != nil {
			return collectResult{}, err
		}
		storeHooks.WaitForKind(p.Registry, consumers)
		for _, c := range cs {
			if c.whenServed {
				c.served = served
			}
		}
	}
	runnables := make([]manager.Runnable, len(cs))
	for i, c := range cs {
		if p.Logger != nil && !c.ownLogger {
			c.setLogger(p.Logger)
		}
		runnables[i] = c
	}
	return collectResult{Controllers: cs, Hosted: hosted, Switch: sw, Runnables: runnables}, nil
}

// newClient returns the app's direct client: it reads from and writes to the
// API server.
func newClient(conn *connection.Connection) client.Client { return conn.Client }
