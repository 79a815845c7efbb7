package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// countingReconciler counts the ConfigMaps it reconciles, reading each
// through its manager's cached client.
type countingReconciler struct {
	client.Client
	mu   sync.Mutex
	seen map[string]int
}

func (r *countingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var secrets corev1.SecretList
	if err := r.List(ctx, &secrets, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[req.String()]++
	return ctrl.Result{}, nil
}

func (r *countingReconciler) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[key]
}

// hostCounting hosts, as a kubebuilder operator would set itself up, a
// controller of ConfigMaps that owns Secrets.
func hostCounting(name string, r *countingReconciler) fx.Option {
	return hostCountingIn(name, r, nil)
}

// hostCountingIn is hostCounting, keeping the operator's manager in mgr
// unless it is nil.
func hostCountingIn(name string, r *countingReconciler, mgr *ctrl.Manager) fx.Option {
	return fxcontroller.SetupWithManager(func(m ctrl.Manager) error {
		if mgr != nil {
			*mgr = m
		}
		r.Client = m.GetClient()
		return ctrl.NewControllerManagedBy(m).
			For(&corev1.ConfigMap{}).
			Owns(&corev1.Secret{}).
			Named(name).
			Complete(r)
	}, fxcontroller.WithName(name))
}

// Two hosted operators and a native module asking for the same kinds share
// one store, and so one watch, per kind.
func TestHostedOperatorsShareStoresWithNativeModules(t *testing.T) {
	cfg := testenv.Config(t)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")

	a, b := &countingReconciler{seen: map[string]int{}}, &countingReconciler{seen: map[string]int{}}
	var (
		native   *fxstore.Store[*corev1.ConfigMap]
		registry *fxstore.Registry
	)
	before := scrapeRequests(t, cfg, "configmaps")
	beforeSecrets := scrapeRequests(t, cfg, "secrets")
	fxApp := testenv.App(t, cfg, lifecycle.Config{}, zaptest.NewLogger(t),
		fxcontroller.Module,
		hostCounting("alpha", a),
		hostCounting("beta", b),
		storeOf[*corev1.ConfigMap](fxstore.Spec{}, &native),
		storeOf[*corev1.Secret](fxstore.Spec{}, nil),
		fx.Populate(&registry),
	)
	fxApp.RequireStart()
	defer fxApp.RequireStop()

	_, err = kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	key := ns + "/settings"
	require.Eventually(t, func() bool { return a.count(key) > 0 && b.count(key) > 0 }, 10*time.Second, 20*time.Millisecond,
		"both hosted operators reconcile the ConfigMap")
	require.Eventually(t, func() bool { _, err := native.Get(ns, "settings"); return err == nil }, 10*time.Second, 20*time.Millisecond)

	for _, s := range registry.Stores() {
		t.Logf("%s: consumers %q", s.Key, s.Consumers)
	}
	require.Len(t, registry.Stores(), 2, "one store per kind")
	for _, s := range registry.Stores() {
		assert.Subset(t, s.Consumers, []string{"alpha", "beta"}, "%s is the hosted operators' store", s.Key)
		assert.False(t, s.Late, "%s started with the app", s.Key)
	}

	time.Sleep(500 * time.Millisecond) // let any extra request show up
	for resource, was := range map[string]testenv.APIRequests{"configmaps": before, "secrets": beforeSecrets} {
		d := scrapeRequests(t, cfg, resource).Minus(was)
		t.Logf("%s: %v LIST, %v open WATCH", resource, d.Lists, d.OpenWatches)
		assert.Equal(t, 1.0, d.OpenWatches, "open WATCH requests for %s", resource)
		assert.LessOrEqual(t, d.Lists, 1.0, "LIST requests for %s", resource)
	}
}

// A hosted operator that calls RemoveInformer while another operator reads
// the same kind: the other keeps its store, which goes on following the
// API server over the same watch, and the one that removed it is no longer
// its consumer.
func TestHostedRemoveInformerKeepsAnotherOperatorsStore(t *testing.T) {
	cfg := testenv.Config(t)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	a, b := &countingReconciler{seen: map[string]int{}}, &countingReconciler{seen: map[string]int{}}
	var (
		alpha    ctrl.Manager
		registry *fxstore.Registry
	)
	fxApp := testenv.App(t, cfg, lifecycle.Config{}, zaptest.NewLogger(t),
		fxcontroller.Module,
		hostCountingIn("alpha", a, &alpha),
		hostCounting("beta", b),
		fx.Populate(&registry),
	)
	fxApp.RequireStart()
	defer fxApp.RequireStop()
	_, err = kube.CoreV1().ConfigMaps(ns).Create(t.Context(), testenv.ConfigMap(ns, "first"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return a.count(ns+"/first") > 0 && b.count(ns+"/first") > 0 }, 10*time.Second, 20*time.Millisecond)
	watches := scrapeRequests(t, cfg, "configmaps").OpenWatches

	require.NoError(t, alpha.GetCache().RemoveInformer(t.Context(), &corev1.ConfigMap{}))
	var configMaps *fxstore.StoreInfo
	for _, s := range registry.Stores() {
		if s.Key.Kind.Kind == "ConfigMap" {
			configMaps = &s
		}
	}
	require.NotNil(t, configMaps, "beta keeps the ConfigMaps' store")
	assert.Equal(t, []string{"beta"}, configMaps.Consumers)
	_, err = kube.CoreV1().ConfigMaps(ns).Create(t.Context(), testenv.ConfigMap(ns, "second"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.count(ns+"/second") > 0 }, 10*time.Second, 20*time.Millisecond,
		"beta reconciles what its store hears")
	var cm corev1.ConfigMap
	require.NoError(t, b.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "second"}, &cm), "beta's client reads its store")
	assert.Equal(t, watches, scrapeRequests(t, cfg, "configmaps").OpenWatches, "the same watch")
}

// lateReader Gets a ServiceAccount, a kind nothing watches, at each
// reconcile, and keeps the last error.
type lateReader struct {
	client.Client
	namespace string // the test's: other namespaces are ignored

	mu      sync.Mutex
	lastErr error
	found   bool
}

func (r *lateReader) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != r.namespace {
		return reconcile.Result{}, nil
	}
	var sa corev1.ServiceAccount
	err := r.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: "default"}, &sa)
	r.mu.Lock()
	r.lastErr, r.found = err, err == nil
	r.mu.Unlock()
	return reconcile.Result{}, err
}

func (r *lateReader) last() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.found, r.lastErr
}

func hostLateReader(r *lateReader) fx.Option {
	return fxcontroller.SetupWithManager(func(mgr ctrl.Manager) error {
		r.Client = mgr.GetClient()
		return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("late-reader").Complete(r)
	}, fxcontroller.WithName("late-reader"))
}

// A kind first read after start gets a store started then, which describe
// reports; when the kind is forbidden, the read fails naming it, the user
// and the verb.
func TestKindFirstReadAfterStartStartsLate(t *testing.T) {
	admin := testenv.Config(t)
	kube, err := kubernetes.NewForConfig(admin)
	require.NoError(t, err)

	t.Run("allowed", func(t *testing.T) {
		ns := testenv.Namespace(t, kube, "test")
		_, err := kube.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		r := &lateReader{namespace: ns}
		var (
			registry *fxstore.Registry
			ctrls    fxcontroller.Controllers
			hosted   fxcontroller.HostedOperators
		)
		fxApp := testenv.App(t, admin, lifecycle.Config{}, zaptest.NewLogger(t), fxcontroller.Module, hostLateReader(r), fx.Populate(&registry, &ctrls, &hosted))
		fxApp.RequireStart()
		defer fxApp.RequireStop()
		_, err = kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trigger"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { found, _ := r.last(); return found }, 20*time.Second, 20*time.Millisecond,
			"the reconciler reads the ServiceAccount from a store started late")

		g := app.NewGraph(registry, ctrls, hosted)
		var late *app.Store
		for i, s := range g.Stores {
			if s.Kind == "ServiceAccount" {
				late = &g.Stores[i]
			}
		}
		require.NotNil(t, late, "describe lists the late store")
		assert.True(t, late.Late)
		assert.Equal(t, []string{"late-reader"}, late.Consumers)
		var text strings.Builder
		g.WriteText(&text)
		assert.Contains(t, text.String(), "ServiceAccount/v1 (all namespaces)\n    started late, on first read\n    consumers: late-reader")
		// A running app's stores say what they hold.
		require.Positive(t, late.Objects)
		assert.Positive(t, late.Bytes)
		assert.Contains(t, text.String(), fmt.Sprintf("consumers: late-reader\n    holds: %d objects, about ", late.Objects))
	})

	t.Run("forbidden", func(t *testing.T) {
		ns := testenv.Namespace(t, kube, "test")
		user := grantConfigMapsOnly(t, kube, "carol")
		r := &lateReader{namespace: ns}
		fxApp := testenv.App(t, user, lifecycle.Config{}, zaptest.NewLogger(t), fxcontroller.Module, hostLateReader(r))
		fxApp.RequireStart()
		defer fxApp.RequireStop()
		_, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trigger"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { _, err := r.last(); return err != nil }, 20*time.Second, 20*time.Millisecond)
		_, err = r.last()
		t.Log(err)
		assert.ErrorContains(t, err, `store ServiceAccount/v1 (all namespaces): cannot start: forbidden: user "carol" cannot list or watch serviceaccounts at cluster scope`)
	})
}

// grantConfigMapsOnly returns the config of a user who may read ConfigMaps
// everywhere, and nothing else, until the test ends.
func grantConfigMapsOnly(t *testing.T, kube kubernetes.Interface, user string) *rest.Config {
	t.Helper()
	ctx := t.Context()
	_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, kube.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), user, metav1.DeleteOptions{}))
	})
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, kube.RbacV1().ClusterRoleBindings().Delete(context.WithoutCancel(ctx), user, metav1.DeleteOptions{}))
	})
	return testenv.User(t, user)
}

// A hosted operator's runnables, checks and Elected run under the app's
// lifecycle: runnables after every store has synced, checks on the app's
// probe endpoints.
func TestHostedManagerRunsUnderTheAppsLifecycle(t *testing.T) {
	var (
		ready   atomic.Bool
		started = make(chan bool, 1) // whether the stores had synced
		mgr     ctrl.Manager
	)
	probes := testenv.LoopbackAddr(t)
	fxApp := testenv.App(t, testenv.Config(t), lifecycle.Config{HealthProbeBindAddress: probes}, zaptest.NewLogger(t),
		fxcontroller.Module,
		fxcontroller.SetupWithManager(func(m ctrl.Manager) error {
			mgr = m
			if err := m.GetFieldIndexer().IndexField(t.Context(), &corev1.ConfigMap{}, "data.owner", func(o client.Object) []string {
				return []string{o.(*corev1.ConfigMap).Data["owner"]}
			}); err != nil {
				return err
			}
			if err := m.AddReadyzCheck("warm", func(*http.Request) error {
				if !ready.Load() {
					return errors.New("not warm yet")
				}
				return nil
			}); err != nil {
				return err
			}
			return m.Add(manager.RunnableFunc(func(ctx context.Context) error {
				var cms corev1.ConfigMapList
				err := m.GetClient().List(ctx, &cms, client.MatchingFields{"data.owner": "nobody"})
				started <- err == nil
				<-ctx.Done()
				return nil
			}))
		}, fxcontroller.WithName("lifecycle-operator")),
	)
	fxApp.RequireStart()
	defer fxApp.RequireStop()

	select {
	case ok := <-started:
		assert.True(t, ok, "the runnable reads through the cache: its store has synced")
	case <-time.After(10 * time.Second):
		t.Fatal("the runnable did not start")
	}
	select {
	case <-mgr.Elected():
	case <-time.After(10 * time.Second):
		t.Fatal("Elected is not closed once the app runs")
	}
	assert.Equal(t, http.StatusInternalServerError, testenv.Status(probes, "/readyz"), "the operator's failing readyz check fails /readyz")
	resp, err := http.Get("http://" + probes + "/readyz?verbose")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Contains(t, string(body), "[-]lifecycle-operator/warm failed", "the check is listed under the operator's name")
	ready.Store(true)
	assert.Equal(t, http.StatusOK, testenv.Status(probes, "/readyz"))
	assert.Equal(t, http.StatusOK, testenv.Status(probes, "/readyz/lifecycle-operator/warm"), "one check is served by its name")
}
