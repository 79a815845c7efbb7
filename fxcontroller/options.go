package fxcontroller

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxstore"
)

// Option configures a controller made by New.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	predicates     []predicate.Predicate
	watches        []*storeSource
	writes         []Write
	maxConcurrent  int
	rateLimiter    workqueue.TypedRateLimiter[reconcile.Request]
	leaderElection bool
	logger         *zap.Logger
	errs           []error

	// For SetupWithManager only.
	hosted        bool
	name          string
	cacheOptions  *crcache.Options
	clientOptions *client.Options
}

// notHosted reports that an option of New was given to SetupWithManager.
func (o *options) notHosted(option string) bool {
	if o.hosted {
		o.errs = append(o.errs, fmt.Errorf("%s is an option of fxcontroller.New; a hosted operator configures its controllers with the builder", option))
	}
	return o.hosted
}

// onlyHosted reports that an option of SetupWithManager was given to New.
func (o *options) onlyHosted(option string) bool {
	if !o.hosted {
		o.errs = append(o.errs, fmt.Errorf("%s is an option of fxcontroller.SetupWithManager", option))
	}
	return !o.hosted
}

// WithName names a hosted operator (SetupWithManager), in logs and as the
// consumer of its stores in describe and metrics. Defaults to the name of
// its setup function.
func WithName(name string) Option {
	return optionFunc(func(o *options) {
		if o.onlyHosted("WithName") {
			return
		}
		if name == "" {
			o.errs = append(o.errs, errors.New("WithName: name is empty"))
			return
		}
		o.name = name
	})
}

// WithCacheOptions gives a hosted operator (SetupWithManager) the cache
// options its ctrl.Options.Cache held: ByObject selectors, namespaces and
// transforms, DefaultNamespaces, DefaultLabelSelector, DefaultFieldSelector,
// DefaultTransform, DefaultUnsafeDisableDeepCopy, ReaderFailOnMissingInformer.
// Each kind resolves with them to a store of the app's registry (see
// fxstore.NewCache). Defaults to every object of every kind read.
func WithCacheOptions(opts crcache.Options) Option {
	return optionFunc(func(o *options) {
		if o.onlyHosted("WithCacheOptions") {
			return
		}
		o.cacheOptions = &opts
	})
}

// WithClientOptions gives a hosted operator (SetupWithManager) the client
// options its ctrl.Options.Client held, such as Cache.DisableFor (kinds read
// from the API server, not the cache), Cache.Unstructured, DryRun and
// FieldOwner. Its HTTP client, scheme, mapper and cache reader are the
// app's.
func WithClientOptions(opts client.Options) Option {
	return optionFunc(func(o *options) {
		if o.onlyHosted("WithClientOptions") {
			return
		}
		o.clientOptions = &opts
	})
}

// Watches makes changes to the objects of a secondary store enqueue primary
// objects: h maps each event to the requests to reconcile, as with
// controller-runtime's handler.EnqueueRequestForOwner (objects the primary
// objects own) or handler.EnqueueRequestsFromMapFunc (any mapping).
// Predicates filter the store's events before h sees them.
//
// The controller subscribes to the store's shared informer: it adds no watch
// of its own to the API server.
func Watches[T client.Object](store *fxstore.Store[T], h handler.EventHandler, predicates ...predicate.Predicate) Option {
	return optionFunc(func(o *options) {
		if o.notHosted("Watches") {
			return
		}
		switch {
		case store == nil:
			o.errs = append(o.errs, errors.New("Watches: store is nil; pass the store fxstore.For returned (check its error)"))
		case h == nil:
			o.errs = append(o.errs, fmt.Errorf("Watches(%s): handler is nil; map events to requests with handler.EnqueueRequestForOwner or handler.EnqueueRequestsFromMapFunc", store))
		default:
			o.watches = append(o.watches, newStoreSource(store, h, predicates))
		}
	})
}

// WithPredicates filters the primary store's events: an object is enqueued
// only when every predicate passes, for example
// predicate.GenerationChangedPredicate{} to skip status-only updates.
// Defaults to no filter.
func WithPredicates(predicates ...predicate.Predicate) Option {
	return optionFunc(func(o *options) {
		if !o.notHosted("WithPredicates") {
			o.predicates = append(o.predicates, predicates...)
		}
	})
}

// WithMaxConcurrentReconciles sets how many requests are reconciled at once.
// Requests for the same object never run concurrently. Defaults to 1.
func WithMaxConcurrentReconciles(n int) Option {
	return optionFunc(func(o *options) {
		if n < 1 {
			o.errs = append(o.errs, fmt.Errorf("WithMaxConcurrentReconciles(%d): must be at least 1", n))
			return
		}
		o.maxConcurrent = n
	})
}

// WithRateLimiter sets how long a request that failed waits before it is
// retried. Defaults to controller-runtime's: exponential per object, from 5ms
// to 1000s.
func WithRateLimiter(l workqueue.TypedRateLimiter[reconcile.Request]) Option {
	return optionFunc(func(o *options) {
		if o.notHosted("WithRateLimiter") {
			return
		}
		if l == nil {
			o.errs = append(o.errs, errors.New("WithRateLimiter: rate limiter is nil"))
			return
		}
		o.rateLimiter = l
	})
}

// WithLeaderElection sets whether the controller runs only on the leader when
// the app elects one. Defaults to true; pass false for controllers that must
// run on every replica, such as those that only keep local state.
func WithLeaderElection(need bool) Option {
	return optionFunc(func(o *options) { o.leaderElection = need })
}

// WithLogger sets the logger the controller, and the logger in each
// reconcile's context, derive from. Defaults to the app's *zap.Logger when the
// controller is declared with Provide, and to zap.NewNop() otherwise.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(o *options) {
		if l == nil {
			o.errs = append(o.errs, errors.New("WithLogger: logger is nil"))
			return
		}
		o.logger = l
	})
}

// Write is a kind of change a controller makes to the API server, declared
// with Writes so the app's RBAC rules can be derived from its modules.
type Write struct {
	// Resource is the resource written, with its subresource if any, in
	// RBAC's terms: corev1.Resource("configmaps"),
	// appsv1.Resource("deployments/status").
	Resource schema.GroupResource
	// Verbs are RBAC verbs such as "create", "update", "patch" and
	// "delete", sorted.
	Verbs []string
}

func (w Write) String() string {
	return fmt.Sprintf("%s (%s)", w.Resource, strings.Join(w.Verbs, ","))
}

// EventsWrite is what every controller's event recorder needs: Events are
// created, and series of them patched. Controllers need not declare it.
var EventsWrite = Write{
	Resource: schema.GroupResource{Group: "events.k8s.io", Resource: "events"},
	Verbs:    []string{"create", "patch"},
}

// Writes declares that the controller's reconciler writes resource with
// verbs, for example Writes(corev1.Resource("configmaps"), "update",
// "patch"). The app's rbac command grants what controllers declare, in
// addition to list and watch on their stores and EventsWrite. Declare direct
// reads through the client (such as "get") the same way.
func Writes(resource schema.GroupResource, verbs ...string) Option {
	return optionFunc(func(o *options) {
		var errs []error
		if resource.Resource == "" {
			errs = append(errs, fmt.Errorf("Writes(%q): resource is empty; name it in RBAC's terms, such as corev1.Resource(\"configmaps\")", resource))
		}
		if len(verbs) == 0 {
			errs = append(errs, fmt.Errorf("Writes(%q): no verbs; say how it is written, such as \"update\"", resource))
		}
		for _, v := range verbs {
			if v == "" || strings.ContainsAny(v, " ,") {
				errs = append(errs, fmt.Errorf("Writes(%q): invalid verb %q", resource, v))
			}
		}
		if len(errs) > 0 {
			o.errs = append(o.errs, errs...)
			return
		}
		verbs = slices.Compact(slices.Sorted(slices.Values(verbs)))
		o.writes = append(o.writes, Write{Resource: resource, Verbs: verbs})
	})
}
