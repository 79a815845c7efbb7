package test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/listwatch"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// consumers collects the stores that the modules of TestStoresAreSharedBySpec
// asked for.
type consumers struct {
	web []*fxstore.Store[*corev1.ConfigMap]
	api []*fxstore.Store[*corev1.ConfigMap]
}

func askFor(c *consumers, ns string, web bool, selector string) fx.Option {
	return fx.Invoke(func(r *fxstore.Registry) error {
		s, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: ns, LabelSelector: selector})
		if web {
			c.web = append(c.web, s)
		} else {
			c.api = append(c.api, s)
		}
		return err
	})
}

// Five consumers in three modules ask for two distinct specs on ConfigMaps,
// one written three equivalent ways: the API server sees two informers' worth
// of requests, and each store holds exactly the objects its spec selects.
func TestStoresAreSharedBySpec(t *testing.T) {
	cfg := testenv.Config(t)
	ctx := t.Context()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	create := func(name string, labels map[string]string) {
		t.Helper()
		_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create("front", map[string]string{"app": "web", "tier": "front"})
	create("back", map[string]string{"app": "web", "tier": "back"})
	create("api", map[string]string{"app": "api"})

	var c consumers
	app := testenv.App(t, cfg, lifecycle.Config{}, zaptest.NewLogger(t),
		fx.Module("checkout", askFor(&c, ns, true, "app=web,tier=front"), askFor(&c, ns, false, "app=api")),
		fx.Module("billing", askFor(&c, ns, true, " tier=front , app==web")),
		fx.Module("audit", askFor(&c, ns, true, "tier in (front),app=web"), askFor(&c, ns, false, "app in (api)")),
	)
	before := scrapeRequests(t, cfg, "configmaps")
	app.RequireStart()
	defer app.RequireStop()

	require.Len(t, c.web, 3)
	require.Len(t, c.api, 2)
	for _, s := range c.web[1:] {
		assert.Same(t, c.web[0].Informer(), s.Informer())
	}
	assert.Same(t, c.api[0].Informer(), c.api[1].Informer())
	assert.NotSame(t, c.web[0].Informer(), c.api[0].Informer())

	// Each informer opens one watch; it gets its initial list either from a
	// LIST or, with client-go's streaming lists, from that watch.
	var after testenv.APIRequests
	require.Eventually(t, func() bool {
		after = scrapeRequests(t, cfg, "configmaps")
		return after.OpenWatches-before.OpenWatches >= 2
	}, 10*time.Second, 50*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // let any extra request show up
	after = scrapeRequests(t, cfg, "configmaps")
	assert.Equal(t, 2.0, after.OpenWatches-before.OpenWatches, "open WATCH requests for configmaps")
	assert.LessOrEqual(t, after.Lists-before.Lists, 2.0, "LIST requests for configmaps")
	assert.Equal(t, 0.0, after.Watches-before.Watches, "no watch was dropped and reopened")
	t.Logf("configmaps: %v LIST, %v open WATCH (before: %+v, after: %+v)", after.Lists-before.Lists, after.OpenWatches-before.OpenWatches, before, after)

	web, api := c.web[0], c.api[0]
	holds := func(s *fxstore.Store[*corev1.ConfigMap], want ...string) func() bool {
		return func() bool {
			objs, err := s.List()
			if err != nil {
				return false
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.Name)
			}
			slices.Sort(got)
			slices.Sort(want)
			return slices.Equal(got, want)
		}
	}
	eventually := func(cond func() bool, msg string) {
		t.Helper()
		require.Eventually(t, cond, 10*time.Second, 20*time.Millisecond, msg)
	}
	eventually(holds(web, "front"), "initial web")
	eventually(holds(api, "api"), "initial api")

	create("front2", map[string]string{"app": "web", "tier": "front"})
	eventually(holds(web, "front", "front2"), "created")

	back, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "back", metav1.GetOptions{})
	require.NoError(t, err)
	back.Labels["tier"] = "front"
	_, err = kube.CoreV1().ConfigMaps(ns).Update(ctx, back, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(holds(web, "front", "front2", "back"), "updated into the selector")

	apiObj, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "api", metav1.GetOptions{})
	require.NoError(t, err)
	apiObj.Labels = map[string]string{"app": "web", "tier": "front"}
	_, err = kube.CoreV1().ConfigMaps(ns).Update(ctx, apiObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(holds(api), "updated out of the api selector")
	eventually(holds(web, "front", "front2", "back", "api"), "and into the web one")

	require.NoError(t, kube.CoreV1().ConfigMaps(ns).Delete(ctx, "front", metav1.DeleteOptions{}))
	eventually(holds(web, "front2", "back", "api"), "deleted")
	for _, s := range append(c.web, c.api...) {
		got, err := s.Get(ns, "front2")
		if s.Key() == api.Key() {
			assert.Error(t, err)
			continue
		}
		require.NoError(t, err)
		assert.Empty(t, got.ManagedFields, "managedFields are stripped by default")
	}
}

// fxkube_store_received_total counts each object the API server sends once,
// whether the initial list came from a LIST or was streamed in a watch
// (client-go's watch-list, which runs the store's transform twice on every
// streamed object).
func TestReceivedCountsEachObjectOnce(t *testing.T) {
	cfg := testenv.Config(t)
	ctx := t.Context()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	const n = 25
	for i := range n {
		_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	var reg *fxstore.Registry
	app := testenv.App(t, cfg, lifecycle.Config{}, zaptest.NewLogger(t),
		fx.Invoke(func(r *fxstore.Registry) error {
			reg = r
			_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: ns})
			return err
		}),
	)
	before := scrapeRequests(t, cfg, "configmaps")
	app.RequireStart()
	defer app.RequireStop()
	// The streamed list is what counted twice; make sure it is the path taken.
	assert.Equal(t, 0.0, scrapeRequests(t, cfg, "configmaps").Minus(before).Lists, "the initial list was streamed in a watch, not LISTed")

	received := func() float64 {
		t.Helper()
		p := prometheus.NewPedanticRegistry()
		require.NoError(t, p.Register(reg))
		families, err := p.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() == "fxkube_store_received_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no fxkube_store_received_total")
		return 0
	}
	assert.Equal(t, float64(n), received(), "after the initial list")

	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "cm-00", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data = map[string]string{"k": "v"}
	_, err = kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, kube.CoreV1().ConfigMaps(ns).Delete(ctx, "cm-01", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return received() == n+2 }, 10*time.Second, 20*time.Millisecond,
		"an update and a delete are one object each")
}

// A store's lister-watcher lists in the pages it is asked for, as client-go's
// reflector and pager ask, in each of the projections.
func TestListerWatcherListsInPages(t *testing.T) {
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	for i := range 5 {
		_, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	c, err := client.NewWithWatch(testenv.Config(t), client.Options{})
	require.NoError(t, err)
	for _, projection := range []fxstore.Projection{fxstore.Typed, fxstore.Metadata, fxstore.Unstructured} {
		key := fxstore.Key{Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: ns, Projection: projection}
		lw, err := listwatch.New(c, key)
		require.NoError(t, err)
		list := cache.ToListerWatcherWithContext(lw).ListWithContext
		var names []string
		opts := metav1.ListOptions{Limit: 2}
		for pages := 1; ; pages++ {
			page, err := list(t.Context(), opts)
			require.NoError(t, err)
			items, err := meta.ExtractList(page)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(items), 2, "%s: page %d", key, pages)
			for _, o := range items {
				names = append(names, o.(metav1.Object).GetName())
			}
			lm, err := meta.ListAccessor(page)
			require.NoError(t, err)
			if opts.Continue = lm.GetContinue(); opts.Continue == "" {
				assert.Equal(t, 3, pages, "%s: 5 objects in pages of 2", key)
				break
			}
		}
		assert.ElementsMatch(t, []string{"cm-0", "cm-1", "cm-2", "cm-3", "cm-4"}, names, "%s", key)
	}
}
