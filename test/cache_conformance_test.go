package test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/storecache"
)

// The conformance tests build controller-runtime's cache and storecache.New's cache
// with the same options over the same objects, make the same read of both
// and require the same outcome: controller-runtime's cache is the
// specification.

var (
	configMapKind   = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	namespaceKind   = corev1.SchemeGroupVersion.WithKind("Namespace")
	clusterRoleKind = rbacv1.SchemeGroupVersion.WithKind("ClusterRole")
	secretKind      = corev1.SchemeGroupVersion.WithKind("Secret")
)

// conformanceFixture is the objects one conformance case reads, in
// namespaces of its own. Cases name them symbolically: namespaces "a", "b"
// and "c", the cluster role "role", namespaced objects "a/web-front"; reads
// are compared and reported in those names.
type conformanceFixture struct {
	kube     kubernetes.Interface
	inServer map[string]string // symbolic name → name in the API server
	symbolic map[string]string // name in the API server → symbolic name
}

// The fixture's ConfigMaps, indexed by their data's owner and team.
var fixtureConfigMaps = []struct {
	ns, name    string
	labels      map[string]string
	owner, team string
}{
	{"a", "web-front", map[string]string{"app": "web", "tier": "front"}, "alice", "x"},
	{"a", "web-back", map[string]string{"app": "web", "tier": "back"}, "bob", "x"},
	{"a", "api", map[string]string{"app": "api"}, "alice", "y"},
	{"b", "db", map[string]string{"app": "db"}, "alice", "x"},
	{"b", "web-front", map[string]string{"app": "web", "tier": "front"}, "carol", "y"},
	{"c", "web", map[string]string{"app": "web"}, "alice", "x"},
	{"c", "plain", nil, "", ""},
}

func newConformanceFixture(t *testing.T) *conformanceFixture {
	t.Helper()
	ctx := t.Context()
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	f := &conformanceFixture{kube: kube, inServer: map[string]string{}, symbolic: map[string]string{}}
	add := func(symbolic, inServer string) {
		f.inServer[symbolic], f.symbolic[inServer] = inServer, symbolic
	}
	for _, ns := range []string{"a", "b", "c"} {
		add(ns, testenv.Namespace(t, kube, "test"))
	}
	add("role", "conformance-"+f.inServer["a"])
	_, err = kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
		Name: f.inServer["role"], Labels: map[string]string{"app": "web"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, kube.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), f.inServer["role"], metav1.DeleteOptions{}))
	})
	for _, cm := range fixtureConfigMaps {
		data := map[string]string{}
		if cm.owner != "" {
			data["owner"] = cm.owner
		}
		if cm.team != "" {
			data["team"] = cm.team
		}
		f.createConfigMap(t, cm.ns, cm.name, cm.labels, data)
	}
	for name, lbls := range map[string]map[string]string{"token": {"app": "web"}, "plain": nil} {
		_, err := kube.CoreV1().Secrets(f.ns("a")).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return f
}

func (f *conformanceFixture) createConfigMap(t *testing.T, ns, name string, lbls, data map[string]string) {
	t.Helper()
	_, err := f.kube.CoreV1().ConfigMaps(f.ns(ns)).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Data:       data,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// ns returns the namespace named symbolically ns; "" stays all namespaces.
func (f *conformanceFixture) ns(ns string) string { return f.inServer[ns] }

// name returns the object named symbolically name: a namespace or the
// cluster role; other names are the same in the API server.
func (f *conformanceFixture) name(name string) string {
	if n, ok := f.inServer[name]; ok {
		return n
	}
	return name
}

// key names obj symbolically, and reports whether it is the fixture's.
func (f *conformanceFixture) key(obj client.Object) (string, bool) {
	if ns := obj.GetNamespace(); ns != "" {
		s, ok := f.symbolic[ns]
		return s + "/" + obj.GetName(), ok
	}
	s, ok := f.symbolic[obj.GetName()]
	return s, ok
}

// outcome is what a read returned, reduced to what two caches can agree on.
type outcome struct {
	keys     []string                     // the fixture's objects read, named symbolically, sorted
	objs     map[string]k8sruntime.Object // by key, deep copies of what was read
	cont, rv string                       // of a list
	err      error
}

type readFunc func(ctx context.Context, c cache.Cache, f *conformanceFixture) outcome

// getOf reads one object of newObj's kind, named symbolically.
func getOf(newObj func() client.Object, ns, name string, opts ...client.GetOption) readFunc {
	return func(ctx context.Context, c cache.Cache, f *conformanceFixture) outcome {
		obj := newObj()
		if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns(ns), Name: f.name(name)}, obj, opts...); err != nil {
			return outcome{err: err}
		}
		key, ok := f.key(obj)
		if !ok {
			key = fmt.Sprintf("(not the fixture's: %s/%s)", obj.GetNamespace(), obj.GetName())
		}
		return outcome{keys: []string{key}, objs: map[string]k8sruntime.Object{key: obj.DeepCopyObject()}}
	}
}

// listOf lists newList's kind in the namespace named symbolically ns, or in
// all when ns is empty, keeping the fixture's objects only: other tests'
// objects share the API server.
func listOf(newList func() client.ObjectList, ns string, opts ...client.ListOption) readFunc {
	return func(ctx context.Context, c cache.Cache, f *conformanceFixture) outcome {
		list := newList()
		opts := slices.Clone(opts)
		if ns != "" {
			opts = append(opts, client.InNamespace(f.ns(ns)))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			return outcome{err: err}
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return outcome{err: fmt.Errorf("extract list: %w", err)}
		}
		o := outcome{objs: map[string]k8sruntime.Object{}, cont: list.GetContinue(), rv: list.GetResourceVersion()}
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok {
				return outcome{err: fmt.Errorf("list holds %T, not a client.Object", item)}
			}
			if key, ok := f.key(obj); ok {
				o.objs[key] = obj.DeepCopyObject()
			}
		}
		o.keys = slices.Sorted(maps.Keys(o.objs))
		return o
	}
}

// counted reduces a read to how many objects it returned, for reads with a
// limit, whose objects are any of those matching.
func counted(read readFunc) readFunc {
	return func(ctx context.Context, c cache.Cache, f *conformanceFixture) outcome {
		o := read(ctx, c, f)
		if o.err == nil {
			o.keys, o.objs = []string{fmt.Sprintf("%d objects", len(o.keys))}, nil
		}
		return o
	}
}

func configMap() client.Object        { return &corev1.ConfigMap{} }
func configMaps() client.ObjectList   { return &corev1.ConfigMapList{} }
func secret() client.Object           { return &corev1.Secret{} }
func secrets() client.ObjectList      { return &corev1.SecretList{} }
func namespace() client.Object        { return &corev1.Namespace{} }
func namespaces() client.ObjectList   { return &corev1.NamespaceList{} }
func clusterRole() client.Object      { return &rbacv1.ClusterRole{} }
func clusterRoles() client.ObjectList { return &rbacv1.ClusterRoleList{} }

func unstructuredOf(gvk schema.GroupVersionKind) func() client.Object {
	return func() client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u
	}
}

func unstructuredListOf(gvk schema.GroupVersionKind) func() client.ObjectList {
	return func() client.ObjectList {
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		return u
	}
}

func metadataOf(gvk schema.GroupVersionKind) func() client.Object {
	return func() client.Object {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return m
	}
}

func metadataListOf(gvk schema.GroupVersionKind) func() client.ObjectList {
	return func() client.ObjectList {
		m := &metav1.PartialObjectMetadataList{}
		m.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		return m
	}
}

func labelSelector(s string) client.MatchingLabelsSelector {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return client.MatchingLabelsSelector{Selector: sel}
}

// errorClass names the error types and reasons callers of a cache branch on.
func errorClass(err error) string {
	var (
		notStarted *cache.ErrCacheNotStarted
		notCached  *cache.ErrResourceNotCached
	)
	switch {
	case errors.As(err, &notStarted):
		return "ErrCacheNotStarted"
	case errors.As(err, &notCached):
		return "ErrResourceNotCached"
	}
	return string(apierrors.ReasonForError(err))
}

// requireSameOutcome requires fx's outcome of a read to be cr's: the same
// objects, equal but for managed fields unless exact (fxstore drops them by
// default, as storecache.New documents), or an error of the same class.
func requireSameOutcome(t *testing.T, cr, fx outcome, exact bool) {
	t.Helper()
	if cr.err != nil || fx.err != nil {
		require.Error(t, cr.err, "controller-runtime's cache succeeded where storecache.New's cache failed with %v", fx.err)
		require.Error(t, fx.err, "storecache.New's cache succeeded where controller-runtime's failed with %q", cr.err)
		assert.Equal(t, errorClass(cr.err), errorClass(fx.err), "error class of %q and of %q", cr.err, fx.err)
		if errorClass(cr.err) != "" {
			assert.EqualError(t, fx.err, cr.err.Error())
		}
		return
	}
	assert.Equal(t, cr.keys, fx.keys, "objects read")
	normalize := func(objs map[string]k8sruntime.Object) map[string]k8sruntime.Object {
		if exact {
			return objs
		}
		out := make(map[string]k8sruntime.Object, len(objs))
		for k, obj := range objs {
			obj = obj.DeepCopyObject()
			m, err := meta.Accessor(obj)
			require.NoError(t, err)
			m.SetManagedFields(nil)
			out[k] = obj
		}
		return out
	}
	assert.Equal(t, normalize(cr.objs), normalize(fx.objs), "objects read")
	assert.Equal(t, cr.cont, fx.cont, "continue token of the list")
	assert.Equal(t, cr.rv, fx.rv, "resource version of the list")
}

// cachePair is controller-runtime's cache and storecache.New's cache, built with the
// same options.
type cachePair struct {
	cr   cache.Cache
	fx   cache.Cache
	reg  *fxstore.Registry
	conn *connection.Connection
}

type namedCache struct {
	name string
	cache.Cache
}

func (p *cachePair) both() []namedCache {
	return []namedCache{{"controller-runtime's cache", p.cr}, {"storecache.New's cache", p.fx}}
}

// newCachePair builds both caches with opts and calls setup on each, as a
// SetupWithManager declares its indexes before the manager starts.
func newCachePair(t *testing.T, opts cache.Options, setup func(context.Context, cache.Cache) error) *cachePair {
	t.Helper()
	cfg := testenv.Config(t)
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))

	crOpts := opts
	crOpts.Scheme, crOpts.NewInformer = scheme, drainingInformer
	cr, err := cache.New(cfg, crOpts)
	require.NoError(t, err)

	conn, err := connection.New(cfg, scheme)
	require.NoError(t, err)
	reg := fxstore.NewRegistry(scheme)
	t.Cleanup(reg.Stop)
	fx, err := storecache.New(reg, conn.Mapper, opts,
		storecache.WithConsumer("conformance"), storecache.WithLateSyncTimeout(30*time.Second))
	require.NoError(t, err)

	p := &cachePair{cr: cr, fx: fx, reg: reg, conn: conn}
	if setup != nil {
		for _, c := range p.both() {
			require.NoError(t, setup(t.Context(), c), c.name)
		}
	}
	return p
}

// start starts both caches and waits for them to sync. They stop when the
// test ends.
func (p *cachePair) start(t *testing.T) {
	t.Helper()
	// Both caches run until cleanup, after the test's context has ended.
	run, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	stopped := make(chan error, 1)
	go func() { stopped <- p.cr.Start(run) }()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-stopped, "controller-runtime's cache")
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.True(t, p.cr.WaitForCacheSync(ctx), "controller-runtime's cache never synced")
	require.NoError(t, p.reg.Start(run, apiserver.NewSource(p.conn.Client)))
	require.NoError(t, p.reg.WaitForSync(ctx))
}

// drainingInformer is controller-runtime's default informer with watches
// drained once stopped. Without it goleak reports controller-runtime's cache,
// not fxstore's: the watch.Filter that sets the kind of metadata-only watch
// events blocks forever on an event that arrives after the reflector has
// stopped reading (kubernetes/kubernetes#113254). Reads see no difference.
func drainingInformer(lw toolscache.ListerWatcher, obj k8sruntime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(drainingListerWatcher{lw, toolscache.ToListerWatcherWithContext(lw)}, obj, resync, indexers)
}

type drainingListerWatcher struct {
	toolscache.ListerWatcher
	withContext toolscache.ListerWatcherWithContext
}

func (d drainingListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (k8sruntime.Object, error) {
	return d.withContext.ListWithContext(ctx, opts)
}

func (d drainingListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := d.withContext.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	return drainedOnStop{w}, nil
}

type drainedOnStop struct{ watch.Interface }

// Stop stops the watch and drops the events still coming, which ends once
// the watch closes its channel.
func (w drainedOnStop) Stop() {
	w.Interface.Stop()
	go func() {
		for {
			if _, ok := <-w.ResultChan(); !ok {
				return
			}
		}
	}()
}

// dataValue returns an index of ConfigMaps by a key of their data.
func dataValue(key string) client.IndexerFunc {
	return func(obj client.Object) []string {
		if v, ok := obj.(*corev1.ConfigMap).Data[key]; ok {
			return []string{v}
		}
		return nil
	}
}

func indexConfigMaps(ctx context.Context, c cache.Cache) error {
	return errors.Join(
		c.IndexField(ctx, &corev1.ConfigMap{}, "data.owner", dataValue("owner")),
		c.IndexField(ctx, &corev1.ConfigMap{}, "data.team", dataValue("team")),
	)
}

// markTransformed is a cache transform that annotates every object.
func markTransformed(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		return nil, err
	}
	annotations := maps.Clone(obj.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations["conformance"] = "transformed"
	obj.SetAnnotations(annotations)
	return in, nil
}

// conformanceRead is one read, made of both caches.
type conformanceRead struct {
	name string
	read readFunc
	// want is what both read, named symbolically, sorted.
	want []string
	// wantErr is a phrase of controller-runtime's error; set when the read
	// fails. fxstore's error contains controller-runtime's whole message,
	// unless ownMessage says why it has a message of its own, which must
	// still contain wantErr.
	wantErr    string
	ownMessage string
}

func TestCacheConformance(t *testing.T) {
	var (
		all     = []string{"a/api", "a/web-back", "a/web-front", "b/db", "b/web-front", "c/plain", "c/web"}
		inA     = []string{"a/api", "a/web-back", "a/web-front"}
		inAB    = []string{"a/api", "a/web-back", "a/web-front", "b/db", "b/web-front"}
		web     = []string{"a/web-back", "a/web-front", "b/web-front", "c/web"}
		webSel  = labels.SelectorFromSet(labels.Set{"app": "web"})
		front   = labels.SelectorFromSet(labels.Set{"tier": "front"})
		byOwner = client.MatchingFields{"data.owner": "alice"}
	)
	const (
		nonExact  = "non-exact field matches are not supported by the cache"
		unknownNS = "unknown namespace for the cache"
		notCached = "is not cached"
		notFound  = "not found"
		// controller-runtime passes on client-go's "Index with name
		// field:data.owner does not exist".
		indexMessage = "fxstore names the store without the index and how to declare it"
	)
	tests := []struct {
		name string
		opts func(f *conformanceFixture) cache.Options
		// exact compares objects with their managed fields: the options
		// keep or drop them in both caches alike.
		exact bool
		// sees is the fixture's ConfigMaps both caches hold.
		sees  []string
		reads []conformanceRead
	}{
		{
			name: "defaults",
			opts: func(*conformanceFixture) cache.Options { return cache.Options{} },
			sees: all,
			reads: []conformanceRead{
				{name: "get", read: getOf(configMap, "a", "web-front"), want: []string{"a/web-front"}},
				{name: "get missing", read: getOf(configMap, "a", "nope"), wantErr: `ConfigMap "nope" not found`},
				{name: "get from another namespace", read: getOf(configMap, "b", "api"), wantErr: `ConfigMap "api" not found`},
				{name: "get in no namespace", read: getOf(configMap, "", "web"), wantErr: `ConfigMap "web" not found`},
				{name: "get with unsafe disable deep copy", read: getOf(configMap, "b", "db", client.UnsafeDisableDeepCopy), want: []string{"b/db"}},
				{name: "get namespace with a namespace in the key", read: getOf(namespace, "a", "b"), want: []string{"b"}},
				{name: "get cluster role with a namespace in the key", read: getOf(clusterRole, "a", "role"), want: []string{"role"}},
				{name: "get unstructured", read: getOf(unstructuredOf(configMapKind), "a", "api"), want: []string{"a/api"}},
				{name: "get unstructured missing", read: getOf(unstructuredOf(configMapKind), "a", "nope"), wantErr: notFound},
				{name: "get unstructured cluster role with a namespace in the key", read: getOf(unstructuredOf(clusterRoleKind), "b", "role"), want: []string{"role"}},
				{name: "get metadata", read: getOf(metadataOf(configMapKind), "b", "db"), want: []string{"b/db"}},
				{name: "get metadata namespace with a namespace in the key", read: getOf(metadataOf(namespaceKind), "c", "a"), want: []string{"a"}},
				{name: "list", read: listOf(configMaps, ""), want: all},
				{name: "list in namespace", read: listOf(configMaps, "a"), want: inA},
				{name: "list with unsafe disable deep copy", read: listOf(configMaps, "b", client.UnsafeDisableDeepCopy), want: []string{"b/db", "b/web-front"}},
				{name: "list matching labels", read: listOf(configMaps, "", client.MatchingLabels{"app": "web"}), want: web},
				{name: "list matching labels in namespace", read: listOf(configMaps, "b", client.MatchingLabels{"app": "web"}), want: []string{"b/web-front"}},
				{name: "list with in and notin", read: listOf(configMaps, "", labelSelector("app in (web,api),tier notin (back)")), want: []string{"a/api", "a/web-front", "b/web-front", "c/web"}},
				{name: "list with does not exist", read: listOf(configMaps, "", labelSelector("!tier")), want: []string{"a/api", "b/db", "c/plain", "c/web"}},
				{name: "list with exists in namespace", read: listOf(configMaps, "a", labelSelector("tier")), want: []string{"a/web-back", "a/web-front"}},
				{name: "list with notin", read: listOf(configMaps, "", labelSelector("app notin (web)")), want: []string{"a/api", "b/db", "c/plain"}},
				{name: "list with limit", read: counted(listOf(configMaps, "a", client.Limit(2))), want: []string{"2 objects"}},
				{name: "list with limit above count", read: counted(listOf(configMaps, "a", client.Limit(10))), want: []string{"3 objects"}},
				{name: "list with limit and labels", read: counted(listOf(configMaps, "a", client.Limit(1), client.MatchingLabels{"app": "web"})), want: []string{"1 objects"}},
				{name: "list by field in namespace", read: listOf(configMaps, "a", byOwner), want: []string{"a/api", "a/web-front"}},
				{name: "list by field in all namespaces", read: listOf(configMaps, "", byOwner), want: []string{"a/api", "a/web-front", "b/db", "c/web"}},
				{name: "list by field written ==", read: listOf(configMaps, "", client.MatchingFieldsSelector{Selector: fields.ParseSelectorOrDie("data.owner==alice")}), want: []string{"a/api", "a/web-front", "b/db", "c/web"}},
				{name: "list by two fields", read: listOf(configMaps, "", client.MatchingFields{"data.owner": "alice", "data.team": "x"}), want: []string{"a/web-front", "b/db", "c/web"}},
				{name: "list by two fields in namespace", read: listOf(configMaps, "b", client.MatchingFields{"data.owner": "alice", "data.team": "x"}), want: []string{"b/db"}},
				{name: "list by field matching nothing", read: listOf(configMaps, "", client.MatchingFields{"data.owner": "nobody"})},
				{name: "list by field and labels", read: listOf(configMaps, "", byOwner, client.MatchingLabels{"app": "web"}), want: []string{"a/web-front", "c/web"}},
				{name: "list by field and limit", read: counted(listOf(configMaps, "a", byOwner, client.Limit(1))), want: []string{"1 objects"}},
				{name: "list by unindexed field", read: listOf(configMaps, "a", client.MatchingFields{"metadata.name": "api"}), wantErr: "metadata.name", ownMessage: indexMessage},
				{name: "list by indexed and unindexed field", read: listOf(configMaps, "", client.MatchingFields{"data.owner": "alice", "metadata.name": "api"}), wantErr: "metadata.name", ownMessage: indexMessage},
				{name: "list by non-exact field selector", read: listOf(configMaps, "", client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("data.owner", "alice")}), wantErr: nonExact},
				{name: "list by empty field selector", read: listOf(configMaps, "a", client.MatchingFieldsSelector{Selector: fields.Everything()}), wantErr: nonExact},
				{name: "list with continue", read: listOf(configMaps, "a", client.Continue("next")), wantErr: "continue list option is not supported by the cache"},
				{name: "list unstructured", read: listOf(unstructuredListOf(configMapKind), "a", client.MatchingLabels{"app": "web"}), want: []string{"a/web-back", "a/web-front"}},
				{name: "list unstructured by a typed index", read: listOf(unstructuredListOf(configMapKind), "", byOwner), wantErr: "data.owner", ownMessage: indexMessage},
				{name: "list metadata", read: listOf(metadataListOf(configMapKind), ""), want: all},
				{name: "list metadata in namespace with labels", read: listOf(metadataListOf(configMapKind), "b", labelSelector("app in (db)")), want: []string{"b/db"}},
				{name: "list secrets", read: listOf(secrets, "a"), want: []string{"a/plain", "a/token"}},
				{name: "list namespaces", read: listOf(namespaces, ""), want: []string{"a", "b", "c"}},
				{name: "list cluster roles matching labels", read: listOf(clusterRoles, "", client.MatchingLabels{"app": "web"}), want: []string{"role"}},
				{name: "list cluster roles in a namespace", read: listOf(clusterRoles, "a")},
				{name: "list unstructured cluster roles", read: listOf(unstructuredListOf(clusterRoleKind), "", client.MatchingLabels{"app": "web"}), want: []string{"role"}},
			},
		},
		{
			name: "ByObject label selector",
			opts: func(*conformanceFixture) cache.Options {
				return cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: webSel}}}
			},
			sees: web,
			reads: []conformanceRead{
				{name: "get selected", read: getOf(configMap, "a", "web-front"), want: []string{"a/web-front"}},
				{name: "get not selected", read: getOf(configMap, "a", "api"), wantErr: notFound},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"a/web-front", "c/web"}},
				{name: "list unstructured", read: listOf(unstructuredListOf(configMapKind), ""), want: web},
				{name: "list metadata in namespace", read: listOf(metadataListOf(configMapKind), "a"), want: []string{"a/web-back", "a/web-front"}},
				{name: "list another kind", read: listOf(secrets, "a"), want: []string{"a/plain", "a/token"}},
			},
		},
		{
			name: "ByObject field selector",
			opts: func(*conformanceFixture) cache.Options {
				return cache.Options{ByObject: map[client.Object]cache.ByObject{
					&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", "web-front")},
				}}
			},
			sees: []string{"a/web-front", "b/web-front"},
			reads: []conformanceRead{
				{name: "get not selected", read: getOf(configMap, "a", "api"), wantErr: notFound},
				{name: "list in namespace", read: listOf(configMaps, "b"), want: []string{"b/web-front"}},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"a/web-front"}},
				{name: "list metadata", read: listOf(metadataListOf(configMapKind), ""), want: []string{"a/web-front", "b/web-front"}},
				{name: "list another kind", read: listOf(secrets, "a"), want: []string{"a/plain", "a/token"}},
			},
		},
		{
			name: "ByObject label selector and a DefaultNamespaces label selector",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{
					ByObject:          map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: webSel}},
					DefaultNamespaces: map[string]cache.Config{f.ns("a"): {LabelSelector: front}, f.ns("b"): {}},
				}
			},
			sees: []string{"a/web-front", "b/web-front"},
			reads: []conformanceRead{
				{name: "get not selected by the namespace's selector", read: getOf(configMap, "a", "web-back"), wantErr: notFound},
				{name: "get not selected by the kind's selector", read: getOf(configMap, "b", "db"), wantErr: notFound},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"a/web-front"}},
				{name: "get another kind not selected", read: getOf(secret, "a", "token"), wantErr: `Secret "token" not found`},
				{name: "list another kind", read: listOf(secrets, "")},
			},
		},
		{
			name: "ByObject namespaces with AllNamespaces",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{
					DefaultNamespaces: map[string]cache.Config{f.ns("b"): {}},
					ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{
						cache.AllNamespaces: {},
						f.ns("a"):           {LabelSelector: webSel},
					}}},
				}
			},
			sees: []string{"a/web-back", "a/web-front", "b/db", "b/web-front", "c/plain", "c/web"},
			reads: []conformanceRead{
				{name: "get not selected", read: getOf(configMap, "a", "api"), wantErr: notFound},
				{name: "get in a namespace of no config", read: getOf(configMap, "c", "plain"), want: []string{"c/plain"}},
				{name: "list in the labelled namespace", read: listOf(configMaps, "a"), want: []string{"a/web-back", "a/web-front"}},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"a/web-front", "b/db", "c/web"}},
				{name: "list unstructured in a namespace of no config", read: listOf(unstructuredListOf(configMapKind), "c"), want: []string{"c/plain", "c/web"}},
				{name: "list another kind outside its namespaces", read: listOf(secrets, "a"), wantErr: unknownNS},
				{name: "list another kind", read: listOf(secrets, "")},
				{name: "get namespace", read: getOf(namespace, "a", "b"), want: []string{"b"}},
			},
		},
		{
			name: "DefaultNamespaces",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns("a"): {}, f.ns("b"): {}}}
			},
			sees: inAB,
			reads: []conformanceRead{
				{name: "get", read: getOf(configMap, "a", "web-front"), want: []string{"a/web-front"}},
				{name: "get in the other namespace", read: getOf(configMap, "b", "db"), want: []string{"b/db"}},
				{name: "get missing", read: getOf(configMap, "b", "api"), wantErr: notFound},
				{name: "get in an unknown namespace", read: getOf(configMap, "c", "web"), wantErr: unknownNS},
				{name: "get in no namespace", read: getOf(configMap, "", "web"), wantErr: unknownNS},
				{name: "list", read: listOf(configMaps, ""), want: inAB},
				{name: "list in an unknown namespace", read: listOf(configMaps, "c"), wantErr: unknownNS},
				{name: "list matching labels", read: listOf(configMaps, "", client.MatchingLabels{"app": "web"}), want: []string{"a/web-back", "a/web-front", "b/web-front"}},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"a/api", "a/web-front", "b/db"}},
				{name: "list by field in namespace", read: listOf(configMaps, "b", byOwner), want: []string{"b/db"}},
				{name: "list by two fields", read: listOf(configMaps, "", client.MatchingFields{"data.owner": "alice", "data.team": "x"}), want: []string{"a/web-front", "b/db"}},
				{name: "list with limit", read: counted(listOf(configMaps, "", client.Limit(2))), want: []string{"2 objects"}},
				{name: "list with limit across namespaces", read: counted(listOf(configMaps, "", client.Limit(4))), want: []string{"4 objects"}},
				{name: "list with limit and labels", read: counted(listOf(configMaps, "", client.Limit(3), client.MatchingLabels{"app": "web"})), want: []string{"3 objects"}},
				{name: "list with limit above count", read: counted(listOf(configMaps, "", client.Limit(50))), want: []string{"5 objects"}},
				{name: "list by non-exact field selector", read: listOf(configMaps, "", client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("data.owner", "alice")}), wantErr: nonExact},
				{name: "list with continue", read: listOf(configMaps, "", client.Continue("next")), wantErr: "continue list option is not supported by the cache"},
				{name: "get unstructured", read: getOf(unstructuredOf(configMapKind), "b", "web-front"), want: []string{"b/web-front"}},
				{name: "list unstructured in an unknown namespace", read: listOf(unstructuredListOf(configMapKind), "c"), wantErr: unknownNS},
				{name: "list metadata", read: listOf(metadataListOf(configMapKind), ""), want: inAB},
				{name: "get namespace outside the namespaces", read: getOf(namespace, "a", "c"), want: []string{"c"}},
				{name: "list namespaces", read: listOf(namespaces, ""), want: []string{"a", "b", "c"}},
				{name: "get cluster role", read: getOf(clusterRole, "c", "role"), want: []string{"role"}},
				{name: "list another kind", read: listOf(secrets, ""), want: []string{"a/plain", "a/token"}},
			},
		},
		{
			name: "DefaultNamespaces AllNamespaces and a namespace with a label selector",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{DefaultNamespaces: map[string]cache.Config{
					cache.AllNamespaces: {},
					f.ns("a"):           {LabelSelector: webSel},
				}}
			},
			sees: []string{"a/web-back", "a/web-front", "b/db", "b/web-front", "c/plain", "c/web"},
			reads: []conformanceRead{
				{name: "get not selected in the labelled namespace", read: getOf(configMap, "a", "api"), wantErr: notFound},
				{name: "get selected in the labelled namespace", read: getOf(configMap, "a", "web-back"), want: []string{"a/web-back"}},
				{name: "get in another namespace", read: getOf(configMap, "c", "plain"), want: []string{"c/plain"}},
				{name: "list in the labelled namespace", read: listOf(configMaps, "a"), want: []string{"a/web-back", "a/web-front"}},
				{name: "list in another namespace", read: listOf(configMaps, "c"), want: []string{"c/plain", "c/web"}},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"a/web-front", "b/db", "c/web"}},
				{name: "list by field in the labelled namespace", read: listOf(configMaps, "a", byOwner), want: []string{"a/web-front"}},
				{name: "list matching labels", read: listOf(configMaps, "", client.MatchingLabels{"tier": "front"}), want: []string{"a/web-front", "b/web-front"}},
				{name: "list unstructured", read: listOf(unstructuredListOf(configMapKind), ""), want: []string{"a/web-back", "a/web-front", "b/db", "b/web-front", "c/plain", "c/web"}},
				{name: "list another kind", read: listOf(secrets, ""), want: []string{"a/token"}},
				{name: "get another kind not selected", read: getOf(secret, "a", "plain"), wantErr: `Secret "plain" not found`},
				{name: "get namespace", read: getOf(namespace, "b", "a"), want: []string{"a"}},
			},
		},
		{
			name: "ByObject namespaces",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{
					DefaultNamespaces: map[string]cache.Config{f.ns("a"): {}},
					ByObject: map[client.Object]cache.ByObject{
						&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{f.ns("b"): {}}},
					},
				}
			},
			sees: []string{"b/db", "b/web-front"},
			reads: []conformanceRead{
				{name: "get in its namespace", read: getOf(configMap, "b", "db"), want: []string{"b/db"}},
				{name: "get in the default namespace", read: getOf(configMap, "a", "api"), wantErr: unknownNS},
				{name: "list in the default namespace", read: listOf(configMaps, "a"), wantErr: unknownNS},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"b/db"}},
				{name: "list another kind", read: listOf(secrets, ""), want: []string{"a/plain", "a/token"}},
				{name: "list another kind in its namespace", read: listOf(secrets, "b"), wantErr: unknownNS},
				{name: "get namespace", read: getOf(namespace, "b", "c"), want: []string{"c"}},
			},
		},
		{
			// A namespace's config in DefaultNamespaces comes before
			// DefaultLabelSelector for a ByObject namespace without one.
			name: "ByObject namespace defaulted from DefaultNamespaces before Default*",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{
					DefaultLabelSelector: labels.SelectorFromSet(labels.Set{"app": "api"}),
					DefaultNamespaces:    map[string]cache.Config{f.ns("a"): {LabelSelector: webSel}},
					ByObject: map[client.Object]cache.ByObject{
						&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{f.ns("a"): {}}},
					},
				}
			},
			sees: []string{"a/web-back", "a/web-front"},
			reads: []conformanceRead{
				{name: "list", read: listOf(configMaps, ""), want: []string{"a/web-back", "a/web-front"}},
				{name: "get not selected", read: getOf(configMap, "a", "api"), wantErr: notFound},
			},
		},
		{
			name: "DefaultLabelSelector and a namespace with its own",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{
					DefaultLabelSelector: webSel,
					DefaultNamespaces:    map[string]cache.Config{f.ns("a"): {LabelSelector: front}, f.ns("b"): {}},
				}
			},
			sees: []string{"a/web-front", "b/web-front"},
			reads: []conformanceRead{
				{name: "get not selected", read: getOf(configMap, "a", "web-back"), wantErr: notFound},
				{name: "list in the namespace with the default", read: listOf(configMaps, "b"), want: []string{"b/web-front"}},
				{name: "get cluster role", read: getOf(clusterRole, "", "role"), want: []string{"role"}},
				{name: "get namespace not selected", read: getOf(namespace, "", "b"), wantErr: notFound},
				{name: "list namespaces", read: listOf(namespaces, "")},
				{name: "list another kind", read: listOf(secrets, "")},
			},
		},
		{
			name: "DefaultUnsafeDisableDeepCopy",
			opts: func(*conformanceFixture) cache.Options {
				return cache.Options{DefaultUnsafeDisableDeepCopy: new(true)}
			},
			sees: all,
			reads: []conformanceRead{
				{name: "get", read: getOf(configMap, "a", "web-front"), want: []string{"a/web-front"}},
				{name: "list in namespace", read: listOf(configMaps, "a"), want: inA},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"a/api", "a/web-front", "b/db", "c/web"}},
				{name: "get unstructured", read: getOf(unstructuredOf(configMapKind), "a", "api"), want: []string{"a/api"}},
				{name: "list metadata in namespace", read: listOf(metadataListOf(configMapKind), "b"), want: []string{"b/db", "b/web-front"}},
				{name: "get namespace", read: getOf(namespace, "", "c"), want: []string{"c"}},
			},
		},
		{
			name: "DefaultTransform TransformStripManagedFields",
			opts: func(*conformanceFixture) cache.Options {
				return cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
			},
			exact: true,
			sees:  all,
			reads: []conformanceRead{
				{name: "get", read: getOf(configMap, "a", "web-front"), want: []string{"a/web-front"}},
				{name: "list unstructured in namespace", read: listOf(unstructuredListOf(configMapKind), "a"), want: inA},
				{name: "get metadata", read: getOf(metadataOf(configMapKind), "b", "db"), want: []string{"b/db"}},
			},
		},
		{
			name:  "DefaultTransform of its own",
			opts:  func(*conformanceFixture) cache.Options { return cache.Options{DefaultTransform: markTransformed} },
			exact: true,
			sees:  all,
			reads: []conformanceRead{
				{name: "get", read: getOf(configMap, "a", "web-front"), want: []string{"a/web-front"}},
				{name: "list in namespace", read: listOf(configMaps, "a"), want: inA},
				{name: "get unstructured", read: getOf(unstructuredOf(configMapKind), "c", "web"), want: []string{"c/web"}},
				{name: "list metadata", read: listOf(metadataListOf(configMapKind), ""), want: all},
				{name: "get namespace", read: getOf(namespace, "", "a"), want: []string{"a"}},
			},
		},
		{
			name: "ByObject UnsafeDisableDeepCopy and Transform",
			opts: func(*conformanceFixture) cache.Options {
				return cache.Options{ByObject: map[client.Object]cache.ByObject{
					&corev1.ConfigMap{}: {UnsafeDisableDeepCopy: new(true), Transform: markTransformed},
				}}
			},
			exact: true,
			sees:  all,
			reads: []conformanceRead{
				{name: "get", read: getOf(configMap, "a", "web-front"), want: []string{"a/web-front"}},
				{name: "list in namespace", read: listOf(configMaps, "a"), want: inA},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"a/api", "a/web-front", "b/db", "c/web"}},
				{name: "get unstructured", read: getOf(unstructuredOf(configMapKind), "c", "web"), want: []string{"c/web"}},
				{name: "list metadata in namespace", read: listOf(metadataListOf(configMapKind), "b"), want: []string{"b/db", "b/web-front"}},
			},
		},
		{
			name: "ReaderFailOnMissingInformer",
			opts: func(*conformanceFixture) cache.Options { return cache.Options{ReaderFailOnMissingInformer: true} },
			sees: all,
			reads: []conformanceRead{
				{name: "get an indexed kind", read: getOf(configMap, "a", "web-front"), want: []string{"a/web-front"}},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"a/api", "a/web-front", "b/db", "c/web"}},
				{name: "get a kind not read before", read: getOf(secret, "a", "token"), wantErr: notCached},
				{name: "list a projection not read before", read: listOf(unstructuredListOf(configMapKind), "a"), wantErr: notCached},
			},
		},
		{
			name: "ReaderFailOnMissingInformer and DefaultNamespaces",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{
					ReaderFailOnMissingInformer: true,
					DefaultNamespaces:           map[string]cache.Config{f.ns("a"): {}, f.ns("b"): {}},
				}
			},
			sees: inAB,
			reads: []conformanceRead{
				{name: "get an indexed kind", read: getOf(configMap, "b", "db"), want: []string{"b/db"}},
				{name: "list by field", read: listOf(configMaps, "", byOwner), want: []string{"a/api", "a/web-front", "b/db"}},
				{name: "get a kind not read before", read: getOf(secret, "a", "token"), wantErr: notCached},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newConformanceFixture(t)
			p := newCachePair(t, tt.opts(f), indexConfigMaps)
			p.start(t)
			for _, c := range p.both() {
				requireHolds(t, c, f, tt.sees)
			}
			for _, r := range tt.reads {
				t.Run(r.name, func(t *testing.T) {
					ctx := t.Context()
					cr, fx := r.read(ctx, p.cr, f), r.read(ctx, p.fx, f)
					if r.wantErr != "" {
						require.ErrorContains(t, cr.err, r.wantErr, "controller-runtime's cache")
						assert.ErrorContains(t, fx.err, r.wantErr, "storecache.New's cache")
						if r.ownMessage == "" {
							assert.ErrorContains(t, fx.err, cr.err.Error(), "storecache.New's cache")
						}
					} else {
						require.NoError(t, cr.err, "controller-runtime's cache")
						require.Equal(t, r.want, cr.keys, "controller-runtime's cache read other objects than the case expects")
					}
					requireSameOutcome(t, cr, fx, tt.exact)
				})
			}
		})
	}
}

// requireHolds waits until c holds exactly the ConfigMaps want of f.
func requireHolds(t *testing.T, c namedCache, f *conformanceFixture, want []string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		o := listOf(configMaps, "")(t.Context(), c, f)
		require.NoError(ct, o.err)
		assert.Equal(ct, want, o.keys)
	}, 10*time.Second, 20*time.Millisecond, "%s never held the fixture's ConfigMaps", c.name)
}

// A Get fills the caller's object with a deep copy, kind set, unless told
// not to copy, and then with the cached object's fields themselves.
func TestCacheConformanceGetCopies(t *testing.T) {
	f := newConformanceFixture(t)
	p := newCachePair(t, cache.Options{}, nil)
	p.start(t)
	ctx := t.Context()
	key := client.ObjectKey{Namespace: f.ns("a"), Name: "web-front"}
	var copied, shared, listed []outcome
	for _, c := range p.both() {
		var cm corev1.ConfigMap
		require.NoError(t, c.Get(ctx, key, &cm), c.name)
		assert.Equal(t, configMapKind, cm.GroupVersionKind(), "%s: kind of a copy", c.name)
		assert.Equal(t, "alice", cm.Data["owner"], c.name)
		want := cm.DeepCopy()
		cm.Data["owner"] = "mallory"
		cm.Labels["app"] = "evil"
		var again corev1.ConfigMap
		require.NoError(t, c.Get(ctx, key, &again), c.name)
		assert.Equal(t, want, &again, "%s: changing what a Get returned changed the cache", c.name)
		copied = append(copied, outcome{keys: []string{"a/web-front"}, objs: map[string]k8sruntime.Object{"a/web-front": want}})

		var first, second corev1.ConfigMap
		require.NoError(t, c.Get(ctx, key, &first, client.UnsafeDisableDeepCopy), c.name)
		require.NoError(t, c.Get(ctx, key, &second, client.UnsafeDisableDeepCopy), c.name)
		assert.Equal(t, reflect.ValueOf(first.Data).UnsafePointer(), reflect.ValueOf(second.Data).UnsafePointer(),
			"%s: Gets without deep copy do not share the cached object's data", c.name)
		shared = append(shared, outcome{keys: []string{"a/web-front"}, objs: map[string]k8sruntime.Object{"a/web-front": first.DeepCopy()}})

		var list corev1.ConfigMapList
		require.NoError(t, c.List(ctx, &list, client.InNamespace(f.ns("a")), client.MatchingLabels{"tier": "front"}), c.name)
		require.Len(t, list.Items, 1, c.name)
		assert.Equal(t, configMapKind, list.Items[0].GroupVersionKind(), "%s: kind of a listed copy", c.name)
		list.Items[0].Data["owner"] = "mallory"
		listed = append(listed, listOf(configMaps, "a", client.MatchingLabels{"tier": "front"})(ctx, c, f))
	}
	requireSameOutcome(t, copied[0], copied[1], false)
	requireSameOutcome(t, shared[0], shared[1], false)
	requireSameOutcome(t, listed[0], listed[1], false)
	for i, c := range p.both() {
		require.NoError(t, listed[i].err, c.name)
		assert.Equal(t, "alice", listed[i].objs["a/web-front"].(*corev1.ConfigMap).Data["owner"],
			"%s: changing what a List returned changed the cache", c.name)
	}
}

// An index declared after start, on a kind already read or not, serves
// lists as one declared before.
func TestCacheConformanceIndexAfterStart(t *testing.T) {
	tests := []struct {
		name        string
		opts        func(f *conformanceFixture) cache.Options
		want        []string // ConfigMaps owned by alice
		wantSecrets []string // Opaque Secrets
	}{
		{
			name:        "defaults",
			opts:        func(*conformanceFixture) cache.Options { return cache.Options{} },
			want:        []string{"a/api", "a/web-front", "b/db", "c/web"},
			wantSecrets: []string{"a/plain", "a/token"},
		},
		{
			name: "DefaultNamespaces",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns("a"): {}, f.ns("b"): {}}}
			},
			want:        []string{"a/api", "a/web-front", "b/db"},
			wantSecrets: []string{"a/plain", "a/token"},
		},
		{
			name: "DefaultNamespaces AllNamespaces and a namespace with a label selector",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{DefaultNamespaces: map[string]cache.Config{
					cache.AllNamespaces: {},
					f.ns("a"):           {LabelSelector: labels.SelectorFromSet(labels.Set{"app": "web"})},
				}}
			},
			want:        []string{"a/web-front", "b/db", "c/web"},
			wantSecrets: []string{"a/token"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newConformanceFixture(t)
			p := newCachePair(t, tt.opts(f), nil)
			p.start(t)
			ctx := t.Context()
			byOwner := client.MatchingFields{"data.owner": "alice"}
			reads := []conformanceRead{
				{name: "by a field indexed after the kind was read", read: listOf(configMaps, "", byOwner), want: tt.want},
				{name: "by a field indexed before the kind was read", read: listOf(secrets, "", client.MatchingFields{"type": string(corev1.SecretTypeOpaque)}), want: tt.wantSecrets},
			}
			for _, c := range p.both() {
				require.NoError(t, listOf(configMaps, "")(ctx, c, f).err, c.name)
				require.NoError(t, c.IndexField(ctx, &corev1.ConfigMap{}, "data.owner", dataValue("owner")), c.name)
				require.NoError(t, c.IndexField(ctx, &corev1.Secret{}, "type", func(obj client.Object) []string {
					return []string{string(obj.(*corev1.Secret).Type)}
				}), c.name)
			}
			for _, r := range reads {
				t.Run(r.name, func(t *testing.T) {
					cr, fx := r.read(ctx, p.cr, f), r.read(ctx, p.fx, f)
					require.NoError(t, cr.err, "controller-runtime's cache")
					require.Equal(t, r.want, cr.keys, "controller-runtime's cache read other objects than the case expects")
					requireSameOutcome(t, cr, fx, false)
				})
			}
		})
	}
}

// addRecorder records the Adds an informer's handler receives of the
// fixture's objects.
type addRecorder struct {
	f       *conformanceFixture
	mu      sync.Mutex
	initial []string // in the initial list
	later   []string
	types   map[string]bool
}

func (r *addRecorder) OnAdd(obj any, isInInitialList bool) {
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	key, ok := r.f.key(o)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.types[fmt.Sprintf("%T", obj)] = true
	if isInInitialList {
		r.initial = append(r.initial, key)
	} else {
		r.later = append(r.later, key)
	}
}

func (r *addRecorder) OnUpdate(any, any) {}
func (r *addRecorder) OnDelete(any)      {}

func (r *addRecorder) seen() (initial, later, types []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.initial)), slices.Sorted(slices.Values(r.later)), slices.Sorted(maps.Keys(r.types))
}

// An event handler added to an informer receives an Add for each object the
// cache holds, and for objects created afterwards.
func TestCacheConformanceInformer(t *testing.T) {
	tests := []struct {
		name        string
		opts        func(f *conformanceFixture) cache.Options
		want        []string // ConfigMaps
		wantSecrets []string
	}{
		{
			name:        "defaults",
			opts:        func(*conformanceFixture) cache.Options { return cache.Options{} },
			want:        []string{"a/api", "a/web-back", "a/web-front", "b/db", "b/web-front", "c/plain", "c/web"},
			wantSecrets: []string{"a/plain", "a/token"},
		},
		{
			name: "DefaultNamespaces",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns("a"): {}, f.ns("b"): {}}}
			},
			want:        []string{"a/api", "a/web-back", "a/web-front", "b/db", "b/web-front"},
			wantSecrets: []string{"a/plain", "a/token"},
		},
		{
			name: "DefaultNamespaces AllNamespaces and a namespace with a label selector",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{DefaultNamespaces: map[string]cache.Config{
					cache.AllNamespaces: {},
					f.ns("a"):           {LabelSelector: labels.SelectorFromSet(labels.Set{"app": "web"})},
				}}
			},
			want:        []string{"a/web-back", "a/web-front", "b/db", "b/web-front", "c/plain", "c/web"},
			wantSecrets: []string{"a/token"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newConformanceFixture(t)
			p := newCachePair(t, tt.opts(f), nil)
			p.start(t)
			ctx := t.Context()
			var configMapRecs, secretRecs []*addRecorder
			for _, c := range p.both() {
				configMapInf, err := c.GetInformer(ctx, &corev1.ConfigMap{})
				require.NoError(t, err, c.name)
				secretInf, err := c.GetInformerForKind(ctx, secretKind)
				require.NoError(t, err, c.name)
				for _, inf := range []struct {
					informer cache.Informer
					recs     *[]*addRecorder
				}{{configMapInf, &configMapRecs}, {secretInf, &secretRecs}} {
					rec := &addRecorder{f: f, types: map[string]bool{}}
					reg, err := inf.informer.AddEventHandler(rec)
					require.NoError(t, err, c.name)
					t.Cleanup(func() { assert.NoError(t, inf.informer.RemoveEventHandler(reg), c.name) })
					require.Eventually(t, reg.HasSynced, 30*time.Second, 10*time.Millisecond, "%s: handler never synced", c.name)
					*inf.recs = append(*inf.recs, rec)
				}
			}
			for _, c := range p.both() {
				assert.True(t, c.WaitForCacheSync(ctx), "%s: WaitForCacheSync", c.name)
				_, err := c.GetInformerForKind(ctx, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
				assert.Error(t, err, "%s: informer of a kind neither in the scheme nor served", c.name)
			}
			f.createConfigMap(t, "a", "late", map[string]string{"app": "web"}, nil)
			for i, c := range p.both() {
				require.Eventually(t, func() bool {
					_, later, _ := configMapRecs[i].seen()
					return len(later) > 0
				}, 30*time.Second, 10*time.Millisecond, "%s: no Add for a ConfigMap created after the handler", c.name)
			}
			for i, want := range []struct {
				recs    []*addRecorder
				initial []string
				later   []string
				types   []string
			}{
				{configMapRecs, tt.want, []string{"a/late"}, []string{"*v1.ConfigMap"}},
				{secretRecs, tt.wantSecrets, nil, []string{"*v1.Secret"}},
			} {
				crInitial, crLater, crTypes := want.recs[0].seen()
				fxInitial, fxLater, fxTypes := want.recs[1].seen()
				assert.Equal(t, want.initial, crInitial, "%d: controller-runtime's cache: initial Adds", i)
				assert.Equal(t, crInitial, fxInitial, "%d: storecache.New's cache: initial Adds", i)
				assert.Equal(t, want.later, crLater, "%d: controller-runtime's cache: later Adds", i)
				assert.Equal(t, crLater, fxLater, "%d: storecache.New's cache: later Adds", i)
				assert.Equal(t, want.types, crTypes, "%d: controller-runtime's cache: types", i)
				assert.Equal(t, crTypes, fxTypes, "%d: storecache.New's cache: types", i)
			}
		})
	}
}

// Before it starts, a cache refuses reads with ErrCacheNotStarted, or, when
// told to fail on kinds it has no informer of, with ErrResourceNotCached.
func TestCacheConformanceNotStarted(t *testing.T) {
	const continueErr = "continue list option is not supported by the cache"
	type read struct {
		name      string
		read      readFunc
		wantClass string // errorClass of controller-runtime's error
		wantErr   string // a phrase of both errors, when wantClass is ""
		// fxWantClass, when set, is storecache.New's cache's errorClass where it
		// differs from controller-runtime's on purpose.
		fxWantClass string
	}
	const notStarted, notCached = "ErrCacheNotStarted", "ErrResourceNotCached"
	reads := []read{
		{name: "get", read: getOf(configMap, "a", "web-front"), wantClass: notStarted},
		{name: "get missing", read: getOf(configMap, "b", "nope"), wantClass: notStarted},
		{name: "list", read: listOf(configMaps, ""), wantClass: notStarted},
		{name: "list in namespace", read: listOf(configMaps, "b"), wantClass: notStarted},
		{name: "list by non-exact field selector", read: listOf(configMaps, "", client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("data.owner", "alice")}), wantClass: notStarted},
		{name: "get unstructured", read: getOf(unstructuredOf(configMapKind), "a", "api"), wantClass: notStarted},
		{name: "list metadata", read: listOf(metadataListOf(configMapKind), "a"), wantClass: notStarted},
		{name: "get namespace", read: getOf(namespace, "", "a"), wantClass: notStarted},
	}
	tests := []struct {
		name  string
		opts  func(f *conformanceFixture) cache.Options
		reads []read
	}{
		{
			name: "defaults",
			opts: func(*conformanceFixture) cache.Options { return cache.Options{} },
			reads: append(slices.Clip(reads),
				read{name: "list with continue", read: listOf(configMaps, "a", client.Continue("next")), wantClass: notStarted}),
		},
		{
			name: "DefaultNamespaces",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns("a"): {}, f.ns("b"): {}}}
			},
			reads: append(slices.Clip(reads),
				// controller-runtime's multi-namespace cache checks the
				// list options before it looks for an informer.
				read{name: "list with continue", read: listOf(configMaps, "a", client.Continue("next")), wantErr: continueErr},
				read{
					// A known difference: controller-runtime's cache asks the
					// REST mapper whether ConfigMaps are namespaced and fails
					// with "unknown namespace for the cache"; storecache.New's cache
					// does no I/O before the app runs (reads before start
					// happen while the app is built) and reports that it has
					// not started.
					name: "get in an unknown namespace", read: getOf(configMap, "c", "web"), wantErr: "unknown namespace for the cache",
					fxWantClass: notStarted,
				}),
		},
		{
			name: "ByObject",
			opts: func(*conformanceFixture) cache.Options {
				return cache.Options{ByObject: map[client.Object]cache.ByObject{
					&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{"app": "web"})},
				}}
			},
			reads: reads,
		},
		{
			name: "ReaderFailOnMissingInformer",
			opts: func(*conformanceFixture) cache.Options { return cache.Options{ReaderFailOnMissingInformer: true} },
			reads: []read{
				{name: "get an indexed kind", read: getOf(configMap, "a", "web-front"), wantClass: notStarted},
				{name: "list an indexed kind", read: listOf(configMaps, "a"), wantClass: notStarted},
				{name: "get a kind not read before", read: getOf(secret, "a", "token"), wantClass: notCached},
				{name: "list a projection not read before", read: listOf(metadataListOf(configMapKind), ""), wantClass: notCached},
				{name: "list a kind not read before with continue", read: listOf(secrets, "", client.Continue("next")), wantClass: notCached},
			},
		},
		{
			name: "ReaderFailOnMissingInformer and DefaultNamespaces",
			opts: func(f *conformanceFixture) cache.Options {
				return cache.Options{
					ReaderFailOnMissingInformer: true,
					DefaultNamespaces:           map[string]cache.Config{f.ns("a"): {}, f.ns("b"): {}},
				}
			},
			reads: []read{
				{name: "get an indexed kind", read: getOf(configMap, "a", "web-front"), wantClass: notStarted},
				{name: "get a kind not read before", read: getOf(secret, "a", "token"), wantClass: notCached},
				{name: "list a kind not read before by non-exact field selector", read: listOf(secrets, "", client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("type", "x")}), wantClass: notCached},
				{name: "list a kind not read before with continue", read: listOf(secrets, "", client.Continue("next")), wantErr: continueErr},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newConformanceFixture(t)
			p := newCachePair(t, tt.opts(f), indexConfigMaps)
			for _, r := range tt.reads {
				t.Run(r.name, func(t *testing.T) {
					cr, fx := r.read(t.Context(), p.cr, f), r.read(t.Context(), p.fx, f)
					require.Error(t, cr.err, "controller-runtime's cache")
					require.Equal(t, r.wantClass, errorClass(cr.err), "controller-runtime's cache: %v", cr.err)
					if r.fxWantClass != "" {
						require.ErrorContains(t, cr.err, r.wantErr, "controller-runtime's cache")
						require.Equal(t, r.fxWantClass, errorClass(fx.err), "storecache.New's cache: %v", fx.err)
						return
					}
					if r.wantErr != "" {
						require.ErrorContains(t, cr.err, r.wantErr, "controller-runtime's cache")
						assert.ErrorContains(t, fx.err, r.wantErr, "storecache.New's cache")
					}
					requireSameOutcome(t, cr, fx, false)
				})
			}
		})
	}
}
