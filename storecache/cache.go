package storecache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/caller"
	"github.com/fxkube/fxkube/internal/informers"
	"github.com/fxkube/fxkube/internal/kinds"
	"github.com/fxkube/fxkube/internal/storehooks"
)

// storeHooks are what fxstore's registry does for the cache and not for
// users.
var storeHooks = storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec, fxstore.Option]()

// forObject asks r for the store of spec's objects of example's type.
func forObject(r *fxstore.Registry, example client.Object, spec fxstore.Spec, opts ...fxstore.Option) (*fxstore.Store[client.Object], error) {
	s, err := storeHooks.ForObject(r, example, spec, opts...)
	if err != nil {
		return nil, err
	}
	return s.(*fxstore.Store[client.Object]), nil
}

// registryCache is a controller-runtime cache.Cache whose informers are a
// registry's stores: each kind resolves, with the cache's options, to the
// registry's store for that spec, shared with every module and every other
// cache asking for the same one. It gives hosted controller-runtime code the
// semantics of controller-runtime's own cache: reads fill the caller's
// object with a deep copy (unless UnsafeDisableDeepCopy), field indexes are
// scoped by namespace, and a kind first read after the registry has started
// gets a store started then, through the registry's pre-flight checks.
type registryCache struct {
	registry *fxstore.Registry
	mapper   meta.RESTMapper
	opts     crcache.Options
	consumer string
	// syncTimeout bounds how long a read waits for a store started late.
	syncTimeout time.Duration

	mu      sync.Mutex
	kinds   map[cacheKind]*cachedKind
	pending map[cacheKind][]fieldIndex // declared before the kind resolved
	// synced is the kinds whose stores have all synced, for reads to find
	// without a lock; replaced, never changed, under mu.
	synced atomic.Pointer[map[cacheKind]*cachedKind]
}

var _ crcache.Cache = (*registryCache)(nil)

// cacheKind is a kind in one projection.
type cacheKind struct {
	gvk  schema.GroupVersionKind
	proj fxstore.Projection
}

type fieldIndex struct {
	field   string
	extract client.IndexerFunc
}

// cachedKind is the stores of one kind: one, or one per namespace when the
// options restrict the kind to several.
type cachedKind struct {
	gvk     schema.GroupVersionKind
	example client.Object
	scope   atomic.Int32     // scopeUnknown until resolved through the mapper
	stores  []namespaceStore // sorted by namespace; "" (all others) first
	// indexes maps each field the cache indexed to its index's name;
	// replaced, never changed, under the cache's mu.
	indexes atomic.Pointer[map[string]string]
	// handlers are those added through the informers given for the kind.
	handlers handlers
}

// release gives back the cache's requests for ck's stores.
func (ck *cachedKind) release() {
	for _, ns := range ck.stores {
		ns.release()
	}
}

// The scope of a cachedKind's kind.
const (
	scopeUnknown int32 = iota
	scopeNamespaced
	scopeCluster
)

// indexName returns the name of the index of field, or "" if the cache has
// not indexed it.
func (ck *cachedKind) indexName(field string) string {
	if m := ck.indexes.Load(); m != nil {
		return (*m)[field]
	}
	return ""
}

type namespaceStore struct {
	namespace  string       // "" for all namespaces not listed elsewhere
	spec       fxstore.Spec // the store's, as the cache requested it
	store      *fxstore.Store[client.Object]
	release    func() // gives the cache's request for the store back
	noDeepCopy bool
}

// New returns a controller-runtime cache.Cache whose informers are r's
// stores, with controller-runtime's cache options: each kind resolves to
// the store of its spec, shared with every module and every other cache
// asking for the same one. Reads fill the caller's object with a deep copy
// (unless UnsafeDisableDeepCopy), field indexes are scoped by namespace,
// and a kind first read after start gets a store started then, through
// the registry's pre-flight checks.
//
// The options' selectors, namespaces, transforms and UnsafeDisableDeepCopy
// are honoured per kind as controller-runtime's cache does, with one
// difference: without a transform, objects are stored without
// managedFields (fxstore's default, so that hosted and native requests share
// stores); set a DefaultTransform or ByObject Transform to keep them.
// Options that only a cache of its own could honour (SyncPeriod, a custom
// NewInformer, a WatchErrorHandler, disabled bookmarks, its own HTTP client,
// scheme or mapper) are rejected with an error saying what to do instead.
// mapper tells namespaced kinds from cluster-scoped ones; it is asked only
// once the app runs. New does no I/O.
func New(r *fxstore.Registry, mapper meta.RESTMapper, opts crcache.Options, options ...Option) (crcache.Cache, error) {
	c := &registryCache{
		registry:    r,
		mapper:      mapper,
		opts:        opts,
		consumer:    caller.Name(1),
		syncTimeout: 2 * time.Minute,
		kinds:       make(map[cacheKind]*cachedKind),
		pending:     make(map[cacheKind][]fieldIndex),
	}
	for _, o := range options {
		o.applyTo(c)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("cache options of %s: %w", c.consumer, err)
	}
	return c, nil
}

func (c *registryCache) validate() error {
	o := c.opts
	var errs []error
	unsupported := func(set bool, what, instead string) {
		if set {
			errs = append(errs, fmt.Errorf("%s is not supported: %s", what, instead))
		}
	}
	unsupported(o.HTTPClient != nil, "HTTPClient", "the app's one connection is used; leave it unset")
	unsupported(o.Mapper != nil, "Mapper", "the app's REST mapper is used; leave it unset")
	unsupported(o.Scheme != nil && o.Scheme != c.registry.Scheme(), "a Scheme of its own",
		"add types to the app's scheme with fxstore.AddToScheme and leave it unset")
	unsupported(o.NewInformer != nil, "NewInformer", "stores are the registry's shared informers; leave it unset")
	unsupported(o.DefaultWatchErrorHandler != nil, "DefaultWatchErrorHandler",
		"list/watch errors are logged and counted in fxkube_store_list_watch_errors_total; leave it unset")
	checkConfig := func(where string, cfg crcache.Config) {
		unsupported(cfg.SyncPeriod != nil, where+"SyncPeriod",
			"stores do not resync; return reconcile.Result{RequeueAfter: d} to reconcile periodically")
		unsupported(cfg.EnableWatchBookmarks != nil && !*cfg.EnableWatchBookmarks, where+"EnableWatchBookmarks=false",
			"stores always ask for bookmarks; leave it unset")
		if err := checkSelectors(cfg); err != nil {
			errs = append(errs, fmt.Errorf("%s%w", where, err))
		}
	}
	checkConfig("", crcache.Config{
		LabelSelector: o.DefaultLabelSelector, FieldSelector: o.DefaultFieldSelector,
		EnableWatchBookmarks: o.DefaultEnableWatchBookmarks, SyncPeriod: o.SyncPeriod,
	})
	for _, ns := range slices.Sorted(maps.Keys(o.DefaultNamespaces)) {
		checkConfig(fmt.Sprintf("DefaultNamespaces[%q].", ns), o.DefaultNamespaces[ns])
	}
	for obj, by := range o.ByObject {
		where := fmt.Sprintf("ByObject[%T].", obj)
		if _, err := apiutil.GVKForObject(obj, c.registry.Scheme()); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w; register its type with fxstore.AddToScheme", strings.TrimSuffix(where, "."), err))
		}
		checkConfig(where, crcache.Config{
			LabelSelector: by.Label, FieldSelector: by.Field,
			EnableWatchBookmarks: by.EnableWatchBookmarks, SyncPeriod: by.SyncPeriod,
		})
		for _, ns := range slices.Sorted(maps.Keys(by.Namespaces)) {
			checkConfig(fmt.Sprintf("%sNamespaces[%q].", where, ns), by.Namespaces[ns])
		}
	}
	// Every spec the options can give must be valid: the specs of the
	// default and of each ByObject kind, as if namespaced.
	for _, cfgs := range c.allConfigs() {
		for ns, cfg := range cfgs {
			if err := storeHooks.CheckSpec(c.registry, specFor(ns, cfg)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// checkSelectors rejects selectors that cannot be written as a watch's
// selector string.
func checkSelectors(cfg crcache.Config) error {
	if cfg.LabelSelector != nil && !cfg.LabelSelector.Empty() && cfg.LabelSelector.String() == "" {
		return errors.New("label selector selects nothing (labels.Nothing()); to cache no objects of a kind, do not read it")
	}
	if cfg.FieldSelector != nil {
		for _, r := range cfg.FieldSelector.Requirements() {
			if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals && r.Operator != selection.NotEquals {
				return fmt.Errorf("field selector %q: only =, == and != are supported", cfg.FieldSelector)
			}
		}
	}
	return nil
}

// allConfigs returns the per-namespace configs of the default and of every
// ByObject kind, as if namespaced, for validation.
func (c *registryCache) allConfigs() []map[string]crcache.Config {
	out := []map[string]crcache.Config{c.configsFor(schema.GroupVersionKind{}, true)}
	for obj := range c.opts.ByObject {
		if gvk, err := apiutil.GVKForObject(obj, c.registry.Scheme()); err == nil {
			out = append(out, c.configsFor(gvk, true))
		}
	}
	return out
}

// configsFor returns, by namespace, the config the options give gvk, with
// controller-runtime's precedence: ByObject, then DefaultNamespaces[ns], then
// Default*. The namespace "" means all namespaces, or all not listed.
func (c *registryCache) configsFor(gvk schema.GroupVersionKind, namespaced bool) map[string]crcache.Config {
	o := c.opts
	defaults := crcache.Config{
		LabelSelector: o.DefaultLabelSelector, FieldSelector: o.DefaultFieldSelector,
		Transform: o.DefaultTransform, UnsafeDisableDeepCopy: o.DefaultUnsafeDisableDeepCopy,
	}
	var (
		namespaces map[string]crcache.Config
		base       = defaults
	)
	if by, ok := c.byObject(gvk); ok {
		typeLevel := crcache.Config{
			LabelSelector: by.Label, FieldSelector: by.Field,
			Transform: by.Transform, UnsafeDisableDeepCopy: by.UnsafeDisableDeepCopy,
		}
		base = withDefaults(typeLevel, defaults)
		namespaces = maps.Clone(by.Namespaces)
		if namespaces == nil {
			namespaces = maps.Clone(o.DefaultNamespaces)
		}
		for ns, cfg := range namespaces {
			// From the type-level config before its defaults, so that a
			// namespace's own config in DefaultNamespaces comes before
			// Default*, as in controller-runtime.
			cfg = withDefaults(cfg, typeLevel)
			if d, ok := o.DefaultNamespaces[ns]; ok {
				cfg = withDefaults(cfg, d)
			}
			namespaces[ns] = withDefaults(cfg, defaults)
		}
	} else {
		namespaces = maps.Clone(o.DefaultNamespaces)
		for ns, cfg := range namespaces {
			namespaces[ns] = withDefaults(cfg, defaults)
		}
	}
	if !namespaced || len(namespaces) == 0 {
		return map[string]crcache.Config{"": base}
	}
	if cfg, ok := namespaces[metav1.NamespaceAll]; ok {
		// "All namespaces" means all those without a config of their own.
		others := slices.Sorted(maps.Keys(namespaces))
		sels := make([]fields.Selector, 0, len(others))
		for _, ns := range others[1:] {
			sels = append(sels, fields.OneTermNotEqualSelector("metadata.namespace", ns))
		}
		if cfg.FieldSelector != nil {
			sels = append(sels, cfg.FieldSelector)
		}
		cfg.FieldSelector = fields.AndSelectors(sels...)
		namespaces[metav1.NamespaceAll] = cfg
	}
	return namespaces
}

func (c *registryCache) byObject(gvk schema.GroupVersionKind) (crcache.ByObject, bool) {
	for obj, by := range c.opts.ByObject {
		if got, err := apiutil.GVKForObject(obj, c.registry.Scheme()); err == nil && got == gvk {
			return by, true
		}
	}
	return crcache.ByObject{}, false
}

// restrictsNamespaces reports whether the options confine gvk to some
// namespaces, which only the mapper can tell apply (not to cluster-scoped
// kinds).
func (c *registryCache) restrictsNamespaces(gvk schema.GroupVersionKind) bool {
	if by, ok := c.byObject(gvk); ok && by.Namespaces != nil {
		return len(by.Namespaces) > 0
	}
	return len(c.opts.DefaultNamespaces) > 0
}

func withDefaults(cfg, from crcache.Config) crcache.Config {
	if cfg.LabelSelector == nil {
		cfg.LabelSelector = from.LabelSelector
	}
	if cfg.FieldSelector == nil {
		cfg.FieldSelector = from.FieldSelector
	}
	if cfg.Transform == nil {
		cfg.Transform = from.Transform
	}
	if cfg.UnsafeDisableDeepCopy == nil {
		cfg.UnsafeDisableDeepCopy = from.UnsafeDisableDeepCopy
	}
	return cfg
}

func specFor(namespace string, cfg crcache.Config) fxstore.Spec {
	spec := fxstore.Spec{Namespace: namespace, Transform: transformOf(cfg.Transform)}
	if cfg.LabelSelector != nil {
		spec.LabelSelector = cfg.LabelSelector.String()
	}
	if cfg.FieldSelector != nil {
		spec.FieldSelector = cfg.FieldSelector.String()
	}
	return spec
}

// transformOf names a controller-runtime transform. controller-runtime's
// TransformStripManagedFields is fxstore's default, StripManagedFields;
// any other is named after its function value itself, not its code, as
// closures of one function may capture different values: caches share a
// store with such a transform only when they pass the same function value.
func transformOf(fn toolscache.TransformFunc) fxstore.Transform {
	if fn == nil || caller.Identity(fn) == caller.Identity(fxstore.StripManagedFields.Func) {
		return fxstore.StripManagedFields
	}
	return fxstore.Transform{Name: funcValue(fn), Func: fn}
}

// funcValue names the function value fn: its code and its closure, so that
// two closures of one function literal, which may capture different values,
// are told apart.
func funcValue[F any](fn F) string {
	return fmt.Sprintf("func at %s (%p)", caller.Identity(fn), *(*unsafe.Pointer)(unsafe.Pointer(&fn)))
}

// kindOf returns the kind and projection of obj. It allocates nothing, as
// it runs on every read.
func (c *registryCache) kindOf(obj k8sruntime.Object) (cacheKind, error) {
	gvk, err := apiutil.GVKForObject(obj, c.registry.Scheme())
	if err != nil {
		return cacheKind{}, fmt.Errorf("%w; register the type with fxstore.AddToScheme", err)
	}
	switch obj.(type) {
	case *unstructured.Unstructured:
		return cacheKind{gvk, fxstore.Unstructured}, nil
	case *metav1.PartialObjectMetadata:
		return cacheKind{gvk, fxstore.Metadata}, nil
	}
	return cacheKind{gvk, fxstore.Typed}, nil
}

// listKindOf is kindOf for a list: the kind and projection of its items.
func (c *registryCache) listKindOf(list client.ObjectList) (cacheKind, error) {
	gvk, err := apiutil.GVKForObject(list, c.registry.Scheme())
	if err != nil {
		return cacheKind{}, fmt.Errorf("%w; register the type with fxstore.AddToScheme", err)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	switch list.(type) {
	case *unstructured.UnstructuredList:
		return cacheKind{gvk, fxstore.Unstructured}, nil
	case *metav1.PartialObjectMetadataList:
		return cacheKind{gvk, fxstore.Metadata}, nil
	}
	return cacheKind{gvk, fxstore.Typed}, nil
}

// example returns an object of k's type for its stores.
func (c *registryCache) example(k cacheKind) (client.Object, error) {
	switch k.proj {
	case fxstore.Unstructured:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(k.gvk)
		return u, nil
	case fxstore.Metadata:
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(k.gvk)
		return m, nil
	}
	obj, err := c.registry.Scheme().New(k.gvk)
	if err != nil {
		return nil, fmt.Errorf("%w; register the type with fxstore.AddToScheme", err)
	}
	o, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%T is not a client.Object", obj)
	}
	return o, nil
}

// kind returns the stores of k, requesting them from the registry on first
// use. Requests after the registry has started start the stores late.
func (c *registryCache) kind(k cacheKind) (*cachedKind, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ck, ok := c.kinds[k]; ok {
		return ck, nil
	}
	example, err := c.example(k)
	if err != nil {
		return nil, err
	}
	ck := &cachedKind{gvk: k.gvk, example: example}
	scopeKnown := false
	// A kind the options confine to namespaces is taken to be namespaced
	// unless the mapper says otherwise: it is not asked while the app is
	// built, and when it cannot tell (a CRD not installed), the stores'
	// pre-flight reports why.
	namespaced := true
	if c.restrictsNamespaces(k.gvk) && storeHooks.Started(c.registry) {
		if scoped, err := apiutil.IsGVKNamespaced(k.gvk, c.mapper); err == nil {
			namespaced, scopeKnown = scoped, true
			ck.setScope(namespaced)
		}
	}
	if scopeKnown {
		if by, ok := c.byObject(k.gvk); ok && !namespaced && by.Namespaces != nil {
			return nil, fmt.Errorf("cache options of %s: %s is not namespaced, but its ByObject.Namespaces setting is not nil; remove it", c.consumer, kinds.Name(k.gvk))
		}
	}
	configs := c.configsFor(k.gvk, namespaced)
	opts := []fxstore.Option{fxstore.WithConsumer(c.consumer)}
	indexes := make(map[string]string, len(c.pending[k]))
	for _, ix := range c.pending[k] {
		name := indexName(ix.field, ix.extract)
		indexes[ix.field] = name
		opts = append(opts, storeHooks.FieldIndex(name, ix.extract, indexFieldCall(ix.field, ix.extract)))
	}
	ck.indexes.Store(&indexes)
	for _, ns := range slices.Sorted(maps.Keys(configs)) {
		cfg := configs[ns]
		spec := specFor(ns, cfg)
		if k.proj != fxstore.Typed {
			spec.Kind = k.gvk
		}
		held, release, err := storeHooks.HoldObject(c.registry, example, spec, opts...)
		if err != nil {
			ck.release()
			return nil, err
		}
		ck.stores = append(ck.stores, namespaceStore{
			namespace: ns, spec: spec, store: held.(*fxstore.Store[client.Object]), release: release,
			noDeepCopy: cfg.UnsafeDisableDeepCopy != nil && *cfg.UnsafeDisableDeepCopy,
		})
	}
	delete(c.pending, k)
	c.kinds[k] = ck
	return ck, nil
}

// ready returns the stores of obj's kind once they have synced, waiting for
// stores started late. Before the registry starts, it fails with
// controller-runtime's ErrCacheNotStarted; with ReaderFailOnMissingInformer,
// a kind without stores fails first, with ErrResourceNotCached, as there.
func (c *registryCache) ready(ctx context.Context, k cacheKind) (*cachedKind, error) {
	if synced := c.synced.Load(); synced != nil {
		if ck, ok := (*synced)[k]; ok {
			return ck, nil
		}
	}
	if c.opts.ReaderFailOnMissingInformer && !c.has(k) {
		return nil, &crcache.ErrResourceNotCached{GVK: k.gvk}
	}
	if !storeHooks.Started(c.registry) {
		return nil, &crcache.ErrCacheNotStarted{}
	}
	ck, err := c.kind(k)
	if err != nil {
		return nil, err
	}
	if err := c.waitFor(ctx, ck); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	synced := make(map[cacheKind]*cachedKind)
	if old := c.synced.Load(); old != nil {
		maps.Copy(synced, *old)
	}
	synced[k] = ck
	c.synced.Store(&synced)
	return ck, nil
}

// has reports whether k has stores, or will have once it resolves: an
// index declares them, as controller-runtime's IndexField makes an informer.
func (c *registryCache) has(k cacheKind) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.kinds[k]
	_, declared := c.pending[k]
	return ok || declared
}

func (c *registryCache) waitFor(ctx context.Context, ck *cachedKind) error {
	for _, ns := range ck.stores {
		if ns.store.HasSynced() {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, c.syncTimeout)
		err := c.registry.WaitForStore(wctx, ns.store.Key())
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// isNamespaced reports whether ck's kind is namespaced, asking the mapper
// once if the options did not need to.
func (c *registryCache) isNamespaced(ck *cachedKind) (bool, error) {
	if scope := ck.scope.Load(); scope != scopeUnknown {
		return scope == scopeNamespaced, nil
	}
	namespaced, err := apiutil.IsGVKNamespaced(ck.gvk, c.mapper)
	if err != nil {
		return false, fmt.Errorf("%s: %w", kinds.Name(ck.gvk), err)
	}
	ck.setScope(namespaced)
	return namespaced, nil
}

func (ck *cachedKind) setScope(namespaced bool) {
	if namespaced {
		ck.scope.Store(scopeNamespaced)
	} else {
		ck.scope.Store(scopeCluster)
	}
}

// storeFor returns the store holding namespace's objects, as
// controller-runtime's multi-namespace cache picks one.
func (ck *cachedKind) storeFor(namespace, verb string, key any) (namespaceStore, error) {
	var all *namespaceStore
	for i, ns := range ck.stores {
		if ns.namespace == namespace {
			return ns, nil
		}
		if ns.namespace == "" {
			all = &ck.stores[i]
		}
	}
	if all != nil {
		return *all, nil
	}
	namespaces := make([]string, len(ck.stores))
	for i, ns := range ck.stores {
		namespaces[i] = ns.namespace
	}
	return namespaceStore{}, fmt.Errorf("unable to %s: %v because of unknown namespace for the cache (it caches %s in namespaces %q; add the namespace to the cache options)",
		verb, key, kinds.Name(ck.gvk), namespaces)
}

// Get implements client.Reader: it fills out with a deep copy of the cached
// object (unless UnsafeDisableDeepCopy), as controller-runtime's cache does.
func (c *registryCache) Get(ctx context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	k, err := c.kindOf(out)
	if err != nil {
		return err
	}
	ck, err := c.ready(ctx, k)
	if err != nil {
		return err
	}
	namespaced, err := c.isNamespaced(ck)
	if err != nil {
		return err
	}
	if !namespaced {
		key.Namespace = ""
	}
	ns, err := ck.storeFor(key.Namespace, "get", key)
	if err != nil {
		return err
	}
	obj, err := ns.store.Get(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		// controller-runtime's cache names the kind, not the resource.
		return apierrors.NewNotFound(schema.GroupResource{Group: k.gvk.Group, Resource: k.gvk.Kind}, key.Name)
	}
	if err != nil {
		return err
	}
	var getOpts client.GetOptions
	getOpts.ApplyOptions(opts)
	noCopy := ns.noDeepCopy || (getOpts.UnsafeDisableDeepCopy != nil && *getOpts.UnsafeDisableDeepCopy)
	return fill(out, obj, k.gvk, !noCopy)
}

// fill sets *out to obj, deep-copied when copy is set, as
// controller-runtime's cache reader does.
func fill(out client.Object, obj k8sruntime.Object, gvk schema.GroupVersionKind, deepCopy bool) error {
	if deepCopy {
		obj = obj.DeepCopyObject()
	}
	outVal, objVal := reflect.ValueOf(out), reflect.ValueOf(obj)
	if !objVal.Type().AssignableTo(outVal.Type()) {
		return fmt.Errorf("cache had type %s, but %s was asked for", objVal.Type(), outVal.Type())
	}
	reflect.Indirect(outVal).Set(reflect.Indirect(objVal))
	if deepCopy {
		out.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return nil
}

// List implements client.Reader with the options controller-runtime's cache
// takes: InNamespace, MatchingLabels and label selectors, MatchingFields
// and exact-match field selectors on fields indexed with IndexField, Limit
// and UnsafeDisableDeepCopy.
func (c *registryCache) List(ctx context.Context, out client.ObjectList, opts ...client.ListOption) error {
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	k, err := c.listKindOf(out)
	if err != nil {
		return err
	}
	// controller-runtime's multi-namespace cache refuses a continue token
	// before it looks for an informer; its informer cache, after.
	if lo.Continue != "" && c.restrictsNamespaces(k.gvk) {
		return errContinue
	}
	ck, err := c.ready(ctx, k)
	if err != nil {
		return err
	}
	if lo.Continue != "" {
		return errContinue
	}
	if lo.FieldSelector != nil && !requiresExactMatch(lo.FieldSelector) {
		return errors.New("non-exact field matches are not supported by the cache")
	}
	stores := ck.stores
	if lo.Namespace != "" {
		ns, err := ck.storeFor(lo.Namespace, "list", lo.Namespace)
		if err != nil {
			return err
		}
		stores = []namespaceStore{ns}
	}
	var objs []k8sruntime.Object
	for _, ns := range stores {
		items, err := ns.list(lo, ck.indexName)
		if err != nil {
			return err
		}
		noCopy := ns.noDeepCopy || (lo.UnsafeDisableDeepCopy != nil && *lo.UnsafeDisableDeepCopy)
		for _, obj := range items {
			if lo.Limit > 0 && int64(len(objs)) >= lo.Limit {
				break
			}
			if noCopy {
				objs = append(objs, obj)
				continue
			}
			cp := obj.DeepCopyObject()
			cp.GetObjectKind().SetGroupVersionKind(k.gvk)
			objs = append(objs, cp)
		}
	}
	if err := meta.SetList(out, objs); err != nil {
		return err
	}
	out.SetContinue("continue-not-supported")
	return nil
}

// errContinue is controller-runtime's cache's error for a continue token.
var errContinue = errors.New("continue list option is not supported by the cache")

// list returns the store's objects matching lo's namespace, labels and
// field selector. Each field requirement is an index lookup; objects are
// kept that every lookup found.
func (ns namespaceStore) list(lo client.ListOptions, indexName func(field string) string) ([]client.Object, error) {
	s := ns.store
	if lo.FieldSelector == nil || lo.FieldSelector.Empty() {
		opts := []client.ListOption{client.InNamespace(lo.Namespace)}
		if lo.LabelSelector != nil {
			// A nil selector would select nothing.
			opts = append(opts, client.MatchingLabelsSelector{Selector: lo.LabelSelector})
		}
		return s.List(opts...)
	}
	var objs []client.Object
	for i, req := range lo.FieldSelector.Requirements() {
		name := indexName(req.Field)
		if name == "" {
			return nil, fmt.Errorf("store %s: field %q is not indexed; index it with mgr.GetFieldIndexer().IndexField (or fxstore.WithFieldIndex)", s.Key(), req.Field)
		}
		found, err := s.ByIndex(name, storeHooks.FieldIndexValue(lo.Namespace, req.Value))
		if err != nil {
			return nil, err
		}
		if i == 0 {
			objs = found
			continue
		}
		keys := make(map[client.ObjectKey]struct{}, len(found))
		for _, obj := range found {
			keys[client.ObjectKeyFromObject(obj)] = struct{}{}
		}
		objs = slices.DeleteFunc(objs, func(obj client.Object) bool {
			_, ok := keys[client.ObjectKeyFromObject(obj)]
			return !ok
		})
	}
	if sel := lo.LabelSelector; sel != nil && !sel.Empty() {
		objs = slices.DeleteFunc(objs, func(obj client.Object) bool { return !sel.Matches(labels.Set(obj.GetLabels())) })
	}
	return objs, nil
}

// requiresExactMatch reports whether sel only has = and == terms, the field
// selectors controller-runtime's cache serves from indexes.
func requiresExactMatch(sel fields.Selector) bool {
	for _, r := range sel.Requirements() {
		if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals {
			return false
		}
	}
	return !sel.Empty()
}

// GetInformer implements cache.Informers: it returns the informer of the
// store obj's kind resolves to (requesting it, and after start starting it),
// waiting for it to sync unless told not to, once the registry has started.
func (c *registryCache) GetInformer(ctx context.Context, obj client.Object, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	k, err := c.kindOf(obj)
	if err != nil {
		return nil, err
	}
	return c.informer(ctx, k, opts)
}

// GetInformerForKind implements cache.Informers for a kind of the scheme.
func (c *registryCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	return c.informer(ctx, cacheKind{gvk, fxstore.Typed}, opts)
}

func (c *registryCache) informer(ctx context.Context, k cacheKind, opts []crcache.InformerGetOption) (crcache.Informer, error) {
	var o crcache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	ck, err := c.kind(k)
	if err != nil {
		return nil, err
	}
	if storeHooks.Started(c.registry) && (o.BlockUntilSynced == nil || *o.BlockUntilSynced) {
		if err := c.waitFor(ctx, ck); err != nil {
			return nil, err
		}
	}
	if len(ck.stores) == 1 {
		return kindInformer{ck.stores[0].store.Informer(), ck}, nil
	}
	// One informer over the stores of every namespace, as
	// controller-runtime's multi-namespace cache gives.
	u := informers.NewUnion[string](fmt.Sprintf("the stores of %s by namespace", kinds.Name(ck.gvk)))
	for _, ns := range ck.stores {
		if err := u.Add(ns.namespace, ns.store.Informer()); err != nil {
			return nil, err
		}
	}
	return kindInformer{u, ck}, nil
}

// RemoveInformer implements cache.Informers with controller-runtime's
// semantics for this cache: it forgets obj's kind, its stores and its
// field indexes, and a later read asks for them again. The handlers added
// through the informers it gave for the kind are removed, and those
// informers report themselves stopped. It gives back the cache's requests
// for the stores: a store stops once no module or other cache holds it.
func (c *registryCache) RemoveInformer(_ context.Context, obj client.Object) error {
	k, err := c.kindOf(obj)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, k)
	ck, ok := c.kinds[k]
	if !ok {
		return nil
	}
	delete(c.kinds, k)
	if synced := c.synced.Load(); synced != nil {
		if _, ok := (*synced)[k]; ok {
			next := maps.Clone(*synced)
			delete(next, k)
			c.synced.Store(&next)
		}
	}
	err = ck.handlers.removeAll()
	ck.release()
	return err
}

// Start implements cache.Informers. The app starts its stores, so it fails.
func (c *registryCache) Start(context.Context) error {
	return errors.New("fxstore: the app starts and stops its stores; do not start the cache")
}

// WaitForCacheSync implements cache.Informers: it waits until every store
// the cache has resolved has synced, or ctx ends.
func (c *registryCache) WaitForCacheSync(ctx context.Context) bool {
	if !storeHooks.Started(c.registry) {
		// Nothing syncs before the app starts; a controller warmed up then
		// only declares its stores (see fxcontroller's Hosted.Declare).
		return false
	}
	c.mu.Lock()
	kinds := slices.Collect(maps.Values(c.kinds))
	c.mu.Unlock()
	for _, ck := range kinds {
		for _, ns := range ck.stores {
			if err := ns.store.WaitForSync(ctx); err != nil {
				return false
			}
		}
	}
	return true
}

// IndexField implements client.FieldIndexer with controller-runtime's
// semantics: the index is declared on the store of obj's kind, values are
// scoped by namespace, and lookups across all namespaces work too.
func (c *registryCache) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if extract == nil {
		return fmt.Errorf("index %q of %T: extract function is nil", field, obj)
	}
	k, err := c.kindOf(obj)
	if err != nil {
		return err
	}
	c.mu.Lock()
	ck, ok := c.kinds[k]
	if ok && ck.indexName(field) != "" || slices.ContainsFunc(c.pending[k], func(ix fieldIndex) bool { return ix.field == field }) {
		c.mu.Unlock()
		// controller-runtime's informer fails the same way.
		return fmt.Errorf("cache of %s: indexer conflict: field %q of %s is indexed already; index each field once", c.consumer, field, kinds.Name(k.gvk))
	}
	if !ok {
		// The index is declared as the kind resolves: now, or, when
		// telling a namespaced kind from a cluster-scoped one takes the
		// mapper, which must not be asked while the app is built, once the
		// app runs.
		c.pending[k] = append(c.pending[k], fieldIndex{field, extract})
		later := c.restrictsNamespaces(k.gvk) && !storeHooks.Started(c.registry)
		c.mu.Unlock()
		if later {
			return nil
		}
		_, err := c.kind(k)
		return err
	}
	defer c.mu.Unlock()
	name := indexName(field, extract)
	for _, ns := range ck.stores {
		if _, err := forObject(c.registry, ck.example, ns.spec, fxstore.WithConsumer(c.consumer), storeHooks.FieldIndex(name, extract, indexFieldCall(field, extract)), storeHooks.IndexOnly); err != nil {
			return err
		}
	}
	indexes := maps.Clone(*ck.indexes.Load())
	indexes[field] = name
	ck.indexes.Store(&indexes)
	return nil
}

// indexFieldCall is how an index the cache declares prints: as the call
// that declared it.
func indexFieldCall(field string, extract client.IndexerFunc) string {
	return fmt.Sprintf("IndexField(%q, %s)", field, caller.Of(extract))
}

// indexName names the index of field by extract. Caches that index a field
// of a store they share with the same function value share the index;
// with functions of their own, each has its own, as each
// controller-runtime cache does.
func indexName(field string, extract client.IndexerFunc) string {
	return fxstore.FieldIndexName(field) + " by " + funcValue(extract)
}
