package apiserver_test

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/fxkube/fxkube/apiserver"
	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/storehooks"
)

// discoveryServer is an API server that serves discovery of a few kinds,
// aggregated and by group version, and access reviews, allowed unless deny
// says otherwise; it counts the requests it gets by path, and the access
// reviews by resource and namespace.
type discoveryServer struct {
	deny func(*authorizationv1.ResourceAttributes) bool
	// reviewing, when set, is told of each access review, which then waits
	// until it is closed or the request ends.
	reviewing chan<- struct{}
	hold      chan struct{}
	mu        sync.Mutex
	requests  map[string]int
	reviews   map[string]int
}

func (s *discoveryServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	s.requests[req.Method+" "+req.URL.Path]++
	s.mu.Unlock()
	resource := func(name, kind string, group string, scope apidiscoveryv2.ResourceScope) apidiscoveryv2.APIResourceDiscovery {
		return apidiscoveryv2.APIResourceDiscovery{
			Resource: name, Scope: scope, Verbs: []string{"create", "list", "watch"},
			ResponseKind: &metav1.GroupVersionKind{Group: group, Version: "v1", Kind: kind},
		}
	}
	group := func(name string, resources ...apidiscoveryv2.APIResourceDiscovery) apidiscoveryv2.APIGroupDiscovery {
		return apidiscoveryv2.APIGroupDiscovery{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Versions:   []apidiscoveryv2.APIVersionDiscovery{{Version: "v1", Resources: resources, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}},
		}
	}
	list := func(gv string, resources ...metav1.APIResource) *metav1.APIResourceList {
		return &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: resources}
	}
	namespaced := func(name, kind string) metav1.APIResource {
		return metav1.APIResource{Name: name, Kind: kind, Namespaced: true, Verbs: []string{"list", "watch"}}
	}
	var body any
	switch req.URL.Path {
	case "/api/v1":
		body = list("v1", namespaced("configmaps", "ConfigMap"), namespaced("secrets", "Secret"))
	case "/apis/apps/v1":
		body = list("apps/v1", namespaced("deployments", "Deployment"))
	case "/apis/authorization.k8s.io/v1":
		body = list("authorization.k8s.io/v1", metav1.APIResource{Name: "selfsubjectaccessreviews", Kind: "SelfSubjectAccessReview", Verbs: []string{"create"}})
	case "/api":
		body = apidiscoveryv2.APIGroupDiscoveryList{Items: []apidiscoveryv2.APIGroupDiscovery{group("",
			resource("configmaps", "ConfigMap", "", apidiscoveryv2.ScopeNamespace),
			resource("secrets", "Secret", "", apidiscoveryv2.ScopeNamespace))}}
	case "/apis":
		body = apidiscoveryv2.APIGroupDiscoveryList{Items: []apidiscoveryv2.APIGroupDiscovery{
			group("apps", resource("deployments", "Deployment", "apps", apidiscoveryv2.ScopeNamespace)),
			group("authorization.k8s.io", resource("selfsubjectaccessreviews", "SelfSubjectAccessReview", "authorization.k8s.io", apidiscoveryv2.ScopeCluster)),
			group("authentication.k8s.io", resource("selfsubjectreviews", "SelfSubjectReview", "authentication.k8s.io", apidiscoveryv2.ScopeCluster)),
		}}
	case "/apis/authentication.k8s.io/v1/selfsubjectreviews":
		review := authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: "tester"}}}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
		return
	case "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
		var review authorizationv1.SelfSubjectAccessReview
		if err := json.NewDecoder(req.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if s.reviewing != nil {
			s.reviewing <- struct{}{}
			select {
			case <-s.hold:
			case <-req.Context().Done():
				return
			}
		}
		ra := review.Spec.ResourceAttributes
		s.mu.Lock()
		if s.reviews == nil {
			s.reviews = map[string]int{}
		}
		s.reviews[ra.Resource+" in "+cmp.Or(ra.Namespace, "all")]++
		s.mu.Unlock()
		review.Status.Allowed = s.deny == nil || !s.deny(ra)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
		return
	default:
		http.NotFound(w, req)
		return
	}
	if _, ok := body.(*metav1.APIResourceList); ok {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	}
	_ = json.NewEncoder(w).Encode(body)
}

// Stores bound at once, as Registry.Start binds them, discover the API
// server's kinds once: no store fetches its group version again after the
// first lookup has fetched all of them. controller-runtime's REST mapper
// fetches again only for a lookup that misses in the moment before the
// first takes its lock, so the test binds afresh many times.
func TestSourceDiscoversOnce(t *testing.T) {
	keys := discoveryKeys(t)
	want := map[string]int{
		"GET /api":  1,
		"GET /apis": 1,
		"POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews": 2 * len(keys),
	}
	for range 30 {
		server := &discoveryServer{requests: map[string]int{}}
		ts := httptest.NewServer(server)
		cfg := &rest.Config{Host: ts.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
		conn, err := connection.New(cfg, clientgoscheme.Scheme)
		require.NoError(t, err)
		src := apiserver.NewSource(conn.Client)
		bindAtOnce(t, src, keys)
		ts.Close() // waits for the handlers
		require.Equal(t, want, server.requests)
	}
}

// discoveryKeys are the keys of stores of discoveryServer's kinds in a few
// namespaces, each reviewed on its own.
func discoveryKeys(t *testing.T) []fxstore.Key {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	var keys []fxstore.Key
	for _, ns := range []string{"a", "b", "c", "d"} {
		for _, key := range []func() (fxstore.Key, error){
			func() (fxstore.Key, error) { return keyFor[*corev1.ConfigMap](r, fxstore.Spec{Namespace: ns}) },
			func() (fxstore.Key, error) { return keyFor[*corev1.Secret](r, fxstore.Spec{Namespace: ns}) },
			func() (fxstore.Key, error) { return keyFor[*appsv1.Deployment](r, fxstore.Spec{Namespace: ns}) },
		} {
			k, err := key()
			require.NoError(t, err)
			keys = append(keys, k)
		}
	}
	return keys
}

// bindAtOnce binds keys through src at once, as Registry.Start does.
func bindAtOnce(t *testing.T, src *apiserver.Source, keys []fxstore.Key) {
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, key := range keys {
		wg.Go(func() { _, errs[i] = src.Bind(t.Context(), key) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, keys[i])
	}
}

// firstAloneMapper is a REST mapper whose first lookup is slow, as one that
// discovers is, and which counts the lookups that ran meanwhile.
type firstAloneMapper struct {
	meta.RESTMapper
	mu           sync.Mutex
	lookups      int
	firstRunning bool
	overlapped   int
}

func (m *firstAloneMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.mu.Lock()
	first := m.lookups == 0
	m.lookups++
	if m.firstRunning {
		m.overlapped++
	}
	m.firstRunning = m.firstRunning || first
	m.mu.Unlock()
	if !first {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	time.Sleep(20 * time.Millisecond)
	defer func() {
		m.mu.Lock()
		m.firstRunning = false
		m.mu.Unlock()
	}()
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// The first lookup of kinds runs alone, however many stores bind at once:
// the others find what it discovered.
func TestSourceLooksUpFirstAlone(t *testing.T) {
	ts := httptest.NewServer(&discoveryServer{requests: map[string]int{}})
	t.Cleanup(ts.Close)
	cfg := &rest.Config{Host: ts.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	require.NoError(t, err)
	mapper := &firstAloneMapper{RESTMapper: dynamic}
	c, err := client.NewWithWatch(cfg, client.Options{HTTPClient: hc, Scheme: clientgoscheme.Scheme, Mapper: mapper})
	require.NoError(t, err)
	keys := discoveryKeys(t)
	bindAtOnce(t, apiserver.NewSource(c), keys)
	mapper.mu.Lock()
	defer mapper.mu.Unlock()
	require.GreaterOrEqual(t, mapper.lookups, len(keys))
	require.Zero(t, mapper.overlapped, "lookups while the first ran")
}

// Stores bound at once share one access review; when the store that asked
// first is dropped while it runs (its context ends: a bucket given up),
// the others ask again rather than fail with its context's error.
func TestSourceReviewOutlivesAStoreDropped(t *testing.T) {
	reviewing := make(chan struct{}, 8)
	server := &discoveryServer{requests: map[string]int{}, reviewing: reviewing, hold: make(chan struct{})}
	ts := httptest.NewServer(server)
	t.Cleanup(ts.Close)
	cfg := &rest.Config{Host: ts.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	conn, err := connection.New(cfg, clientgoscheme.Scheme)
	require.NoError(t, err)
	t.Cleanup(conn.HTTPClient.CloseIdleConnections)
	src := apiserver.NewSource(conn.Client)
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	dropped, err := keyFor[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a", LabelSelector: "shard=0"})
	require.NoError(t, err)
	kept, err := keyFor[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a", LabelSelector: "shard=1"})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { _, err := src.Bind(ctx, dropped); first <- err }()
	<-reviewing // the first store's review (list and watch) is running
	<-reviewing
	second := make(chan error, 1)
	go func() { _, err := src.Bind(t.Context(), kept); second <- err }()
	time.Sleep(50 * time.Millisecond) // the second waits for the first's review
	cancel()
	require.ErrorIs(t, <-first, context.Canceled)
	for range 2 {
		select {
		case <-reviewing: // the second asks again
		case err := <-second:
			t.Fatalf("the second store did not ask again: %v", err)
		}
	}
	close(server.hold)
	require.NoError(t, <-second, "the second store binds")
}

// A store in one namespace takes the answer for its resource in all
// namespaces when a store of all of them is bound too; it asks for its own
// only when that is denied, or when nothing asks for all namespaces.
func TestSourceReviewsANamespaceOnlyWhenNeeded(t *testing.T) {
	server := &discoveryServer{
		requests: map[string]int{},
		deny: func(ra *authorizationv1.ResourceAttributes) bool {
			return ra.Resource == "secrets" && ra.Namespace == ""
		},
	}
	ts := httptest.NewServer(server)
	t.Cleanup(ts.Close)
	cfg := &rest.Config{Host: ts.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	conn, err := connection.New(cfg, clientgoscheme.Scheme)
	require.NoError(t, err)

	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	for _, ask := range []func() error{
		func() error {
			_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "a=1"})
			return err
		},
		func() error {
			_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a", LabelSelector: "b=1"})
			return err
		},
		func() error { _, err := fxstore.For[*corev1.Secret](r, fxstore.Spec{LabelSelector: "a=1"}); return err },
		func() error {
			_, err := fxstore.For[*corev1.Secret](r, fxstore.Spec{Namespace: "a", LabelSelector: "b=1"})
			return err
		},
		func() error { _, err := fxstore.For[*appsv1.Deployment](r, fxstore.Spec{Namespace: "b"}); return err },
	} {
		require.NoError(t, ask())
	}
	err = r.Start(t.Context(), apiserver.NewSource(conn.Client))
	r.Stop()
	var storeErr *fxstore.StoreError
	require.ErrorAs(t, err, &storeErr)
	assert.Equal(t, `store Secret/v1 (all namespaces, labels "a=1"): forbidden: user "tester" cannot list or watch secrets at cluster scope; `+
		"grant it with RBAC (the app's rbac command prints the rules it needs)", err.Error(), "only the store of all Secrets fails")

	server.mu.Lock()
	defer server.mu.Unlock()
	reviews := maps.Clone(server.reviews)
	// A denial is not kept, so that RBAC fixed since is seen: the store in
	// a asks for all namespaces again if the first review has ended.
	assert.Contains(t, []int{2, 4}, reviews["secrets in all"])
	delete(reviews, "secrets in all")
	assert.Equal(t, map[string]int{
		"configmaps in all": 2, // and not in a
		"secrets in a":      2, // all namespaces denied, so
		"deployments in b":  2, // no store of all Deployments asks for all namespaces
	}, reviews)
}

// keyFor returns the key of the store fxstore.For[T] would return for spec,
// without asking for it.
func keyFor[T client.Object](r *fxstore.Registry, spec fxstore.Spec) (fxstore.Key, error) {
	return storehooks.Get[*fxstore.Registry, fxstore.Key, fxstore.Spec, fxstore.Option]().KeyFor(r, reflect.TypeFor[T](), spec)
}
