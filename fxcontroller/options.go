package fxcontroller

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/internal/writes"
)

// Options are typed by the call that takes them, as controller-runtime's
// builder options are: an option of New given to SetupWithManager does not
// compile. Options of both return a type that is both. Each prints as the
// call that made it, as fx's options do.

// Option configures a controller made by New.
type Option interface {
	fmt.Stringer
	applyToController(*options)
}

// HostedOption configures an operator hosted by SetupWithManager.
type HostedOption interface {
	fmt.Stringer
	applyToHosted(*options)
}

// option is an option printed as call. Its constructor's result type says
// which calls take it.
type option struct {
	call  string
	apply func(*options)
}

func (o option) String() string                { return o.call }
func (o option) applyToController(to *options) { o.apply(to) }
func (o option) applyToHosted(to *options)     { o.apply(to) }

func newOption(apply func(*options), format string, args ...any) option {
	return option{call: fmt.Sprintf(format, args...), apply: apply}
}

type options struct {
	predicates     []predicate.Predicate
	watches        []*storeSource
	writes         []Write
	maxConcurrent  int
	rateLimiter    workqueue.TypedRateLimiter[reconcile.Request]
	leaderElection bool
	whenServed     bool
	logger         *zap.Logger
	logr           *logr.Logger // for SetupWithManager only
	errs           []error

	// calls are the options applied, by what they set, to tell options
	// that set one thing twice.
	calls map[string][]string

	// For SetupWithManager only.
	name          string
	cacheOptions  *crcache.Options
	clientOptions *client.Options
	manager       *managerOptions
	webhookTLS    []func(*tls.Config)
	// controllerPrefix qualifies the operator's controllers' names.
	controllerPrefix string
	// inEveryMember hosts the operator in every member cluster.
	inEveryMember bool
}

// WithName names a hosted operator (SetupWithManager), in logs and as the
// consumer of its stores in describe and metrics. Defaults to the name of
// its setup function.
func WithName(name string) HostedOption {
	return newOption(func(o *options) {
		if name == "" {
			o.errs = append(o.errs, errors.New("WithName: name is empty"))
			return
		}
		o.name = name
		o.sets("the name", fmt.Sprintf("fxcontroller.WithName(%q)", name))
	}, "fxcontroller.WithName(%q)", name)
}

// WithControllerPrefix names a hosted operator's (SetupWithManager)
// controllers "<prefix>/<name>", where name is what controller-runtime's
// builder gives them (Named, or the kind: "pod"). The name is the
// controller's everywhere: the "controller" value of its logs, the
// controller label of controller-runtime's metrics, its workqueue's
// metrics, describe and errors. Two operators each with a controller
// "pod" run side by side, unchanged, when one of them (or each) is hosted
// with a prefix:
//
//	fxcontroller.SetupWithManager(jobset.Setup, fxcontroller.WithName("jobset"),
//		fxcontroller.WithControllerPrefix("jobset")) // its "pod" is "jobset/pod"
//
// Defaults to no prefix: controllers keep the names their operator gave
// them, as dashboards of the operator deployed alone know them.
func WithControllerPrefix(prefix string) HostedOption {
	return newOption(func(o *options) {
		if prefix == "" {
			o.errs = append(o.errs, errors.New("WithControllerPrefix: prefix is empty"))
			return
		}
		o.controllerPrefix = prefix
		o.sets("the controller prefix", fmt.Sprintf("fxcontroller.WithControllerPrefix(%q)", prefix))
	}, "fxcontroller.WithControllerPrefix(%q)", prefix)
}

// WithCacheOptions gives a hosted operator (SetupWithManager) the cache
// options its ctrl.Options.Cache held: ByObject selectors, namespaces and
// transforms, DefaultNamespaces, DefaultLabelSelector, DefaultFieldSelector,
// DefaultTransform, DefaultUnsafeDisableDeepCopy, ReaderFailOnMissingInformer.
// Each kind resolves with them to a store of the app's registry (see
// storecache.New). Defaults to every object of every kind read.
func WithCacheOptions(opts crcache.Options) HostedOption {
	return newOption(func(o *options) {
		o.cacheOptions = &opts
		o.sets("the cache options", "fxcontroller.WithCacheOptions(cache.Options{...})")
	}, "fxcontroller.WithCacheOptions(cache.Options{...})")
}

// WithClientOptions gives a hosted operator (SetupWithManager) the client
// options its ctrl.Options.Client held, such as Cache.DisableFor (kinds read
// from the API server, not the cache), Cache.Unstructured, DryRun and
// FieldOwner. Its HTTP client, scheme, mapper and cache reader are the
// app's.
func WithClientOptions(opts client.Options) HostedOption {
	return newOption(func(o *options) {
		o.clientOptions = &opts
		o.sets("the client options", "fxcontroller.WithClientOptions(client.Options{...})")
	}, "fxcontroller.WithClientOptions(client.Options{...})")
}

// Watches makes changes to the objects of a secondary store enqueue primary
// objects: h maps each event to the requests to reconcile, as with
// controller-runtime's handler.EnqueueRequestForOwner (objects the primary
// objects own) or handler.EnqueueRequestsFromMapFunc (any mapping).
// Predicates filter the store's events before h sees them. The store is
// any store, as New's primary is: an *fxstore.Store or an *fxshard.Store.
//
// The controller subscribes to the store's shared informer: it adds no watch
// of its own to the API server.
func Watches(store Primary, h handler.EventHandler, predicates ...predicate.Predicate) Option {
	return newOption(func(o *options) {
		switch {
		case isNil(store):
			o.errs = append(o.errs, errors.New("Watches: store is nil; pass the store fxstore.For or fxshard.For returned (check its error)"))
		case h == nil:
			o.errs = append(o.errs, fmt.Errorf("Watches(%s): handler is nil; map events to requests with handler.EnqueueRequestForOwner or handler.EnqueueRequestsFromMapFunc", storeName(store)))
		default:
			o.watches = append(o.watches, newStoreSource(store, h, predicates))
		}
	}, "fxcontroller.Watches(%s, %s)", storeName(store), typeName(h))
}

// storeName names a store in an option's call; a nil one is "nil".
func storeName(store Primary) string {
	if isNil(store) {
		return "nil"
	}
	if s, ok := store.(fmt.Stringer); ok {
		return s.String() // a sharded store says how it is sharded
	}
	return store.Key().String()
}

// WithPredicates filters the primary store's events: an object is enqueued
// only when every predicate passes, for example
// predicate.GenerationChangedPredicate{} to skip status-only updates.
// Defaults to no filter.
func WithPredicates(predicates ...predicate.Predicate) Option {
	return newOption(func(o *options) { o.predicates = append(o.predicates, predicates...) },
		"fxcontroller.WithPredicates(%s)", typeNames(predicates))
}

// WithMaxConcurrentReconciles sets how many requests are reconciled at once.
// Requests for the same object never run concurrently. Defaults to 1.
func WithMaxConcurrentReconciles(n int) interface {
	Option
	HostedOption
} {
	return newOption(func(o *options) {
		if n < 1 {
			o.errs = append(o.errs, fmt.Errorf("WithMaxConcurrentReconciles(%d): must be at least 1", n))
			return
		}
		o.maxConcurrent = n
		o.sets("the concurrent reconciles", fmt.Sprintf("fxcontroller.WithMaxConcurrentReconciles(%d)", n))
	}, "fxcontroller.WithMaxConcurrentReconciles(%d)", n)
}

// WithRateLimiter sets how long a request that failed waits before it is
// retried. Defaults to controller-runtime's: exponential per object, from 5ms
// to 1000s.
func WithRateLimiter(l workqueue.TypedRateLimiter[reconcile.Request]) Option {
	return newOption(func(o *options) {
		if l == nil {
			o.errs = append(o.errs, errors.New("WithRateLimiter: rate limiter is nil"))
			return
		}
		o.rateLimiter = l
		o.sets("the rate limiter", fmt.Sprintf("fxcontroller.WithRateLimiter(%s)", typeName(l)))
	}, "fxcontroller.WithRateLimiter(%s)", typeName(l))
}

// WithLeaderElection sets whether the controller runs only on the leader when
// the app elects one. Defaults to true; pass false for controllers that must
// run on every replica, such as those that only keep local state.
func WithLeaderElection(need bool) interface {
	Option
	HostedOption
} {
	return newOption(func(o *options) {
		o.leaderElection = need
		o.sets("leader election", fmt.Sprintf("fxcontroller.WithLeaderElection(%t)", need))
	}, "fxcontroller.WithLeaderElection(%t)", need)
}

// WhenServed makes the controller wait for its kinds to be served: those
// of its primary store and of the stores it watches. The app starts
// without it while the API server does not serve one of them, such as a
// custom resource whose CRD is not installed yet:
//
//   - its stores do not fail the start, if only controllers that wait for
//     their kind asked for them; they wait, not started;
//   - describe, /readyz?verbose and fxkube_controller_state say it waits,
//     and readiness does not fail for it.
//
// Once every CRD of its kinds is established, its stores start and sync,
// and then it runs (on the leader, with leader election). When a CRD is
// deleted, it stops: it takes no more work, finishes the reconciles in
// flight within the stop timeout and drops its queue. Its stores stop,
// unless another running controller needs them. When the CRD comes back,
// it runs again. The app watches CustomResourceDefinitions to know: rbac
// grants it.
//
// Only CRDs come and go: a kind served otherwise (built in, or by an
// aggregated API server) is checked at start. A store of a kind that
// anything else asks for must be served at start, as without the option.
func WhenServed() Option {
	return newOption(func(o *options) { o.whenServed = true }, "fxcontroller.WhenServed()")
}

// WithLogger sets the logger the controller, and the logger in each
// reconcile's context, derive from. Defaults to the app's *zap.Logger when the
// controller is declared with Provide, and to zap.NewNop() otherwise.
func WithLogger(l *zap.Logger) interface {
	Option
	HostedOption
} {
	name := "nil"
	if l != nil {
		name = fmt.Sprintf("logger %q", l.Name())
	}
	return newOption(func(o *options) {
		if l == nil {
			o.errs = append(o.errs, errors.New("WithLogger: logger is nil"))
			return
		}
		o.logger = l
		o.sets("the logger", "fxcontroller.WithLogger("+name+")")
	}, "fxcontroller.WithLogger(%s)", name)
}

// WithLogr sets the logger a hosted operator (SetupWithManager) logs
// through: the logr.Logger its ctrl.Options.Logger held, such as
// ctrl.Log. mgr.GetLogger returns it, named after the operator, and its
// controllers and their reconciles' log.FromContext derive from it, as on
// its manager. Defaults to the app's *zap.Logger; WithLogger and WithLogr
// each set it, so give one.
//
// fxcontroller.LoggerFrom in a hosted reconcile returns the zap logger
// beneath a zapr logger, and zap.NewNop() beneath any other.
func WithLogr(l logr.Logger) HostedOption {
	name := "logr.Logger{}"
	if l.GetSink() != nil {
		name = typeName(l.GetSink())
	}
	return newOption(func(o *options) {
		if l.GetSink() == nil {
			o.errs = append(o.errs, errors.New("WithLogr: the logger has no sink (a zero logr.Logger); pass the operator's logger, such as ctrl.Log"))
			return
		}
		o.logr = &l
		o.sets("the logger", "fxcontroller.WithLogr("+name+")")
	}, "fxcontroller.WithLogr(%s)", name)
}

// sets records that call set what, such as "the logger".
func (o *options) sets(what, call string) {
	if o.calls == nil {
		o.calls = map[string][]string{}
	}
	o.calls[what] = append(o.calls[what], call)
}

// setTwice reports what two of the options applied set: the last would
// win in silence.
func (o *options) setTwice() error {
	var errs []error
	for _, what := range slices.Sorted(maps.Keys(o.calls)) {
		if calls := o.calls[what]; len(calls) > 1 {
			errs = append(errs, fmt.Errorf("%s each set %s; give one", strings.Join(calls, " and "), what))
		}
	}
	return errors.Join(errs...)
}

// Write is a kind of change a controller makes to the API server, declared
// with Writes so the app's RBAC rules can be derived from its modules:
// its Resource (in RBAC's terms, with its subresource if any, such as
// appsv1.Resource("deployments/status")) and its Verbs, sorted.
type Write = writes.Write

// Writes declares that the controller's reconciler writes resource with
// verbs, for example Writes(corev1.Resource("configmaps"), "update",
// "patch"). The app's rbac command grants what controllers declare, in
// addition to list and watch on their stores and what their event recorder
// needs (create and patch events.k8s.io Events). Declare direct
// reads through the client (such as "get") the same way.
func Writes(resource schema.GroupResource, verbs ...string) interface {
	Option
	HostedOption
} {
	return newOption(func(o *options) {
		sorted, errs := writes.Check(resource, verbs)
		if len(errs) > 0 {
			o.errs = append(o.errs, errs...)
			return
		}
		o.writes = append(o.writes, Write{Resource: resource, Verbs: sorted})
	}, "fxcontroller.Writes(%q, %q)", resource, verbs)
}

// typeNames lists the types of values, for an option's call.
func typeNames[T any](values []T) string {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = typeName(v)
	}
	return strings.Join(names, ", ")
}

// typeName names v's type without its type arguments, as in
// "predicate.TypedGenerationChangedPredicate".
func typeName(v any) string {
	name := fmt.Sprintf("%T", v)
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	return name
}
