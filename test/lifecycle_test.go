package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

func storeOf[T fxstoreObject](spec fxstore.Spec, into **fxstore.Store[T]) fx.Option {
	return fx.Invoke(func(r *fxstore.Registry) (err error) {
		s, err := fxstore.For[T](r, spec)
		if into != nil {
			*into = s
		}
		return err
	})
}

type fxstoreObject = interface {
	*corev1.ConfigMap | *corev1.Secret | *unstructured.Unstructured
	client.Object
}

// A store whose kind the API server does not serve fails start at once.
func TestStartFailsAtOnceForMissingCRD(t *testing.T) {
	widgets := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	app := testenv.App(t, testenv.Config(t), lifecycle.Config{}, zaptest.NewLogger(t),
		storeOf[*corev1.ConfigMap](fxstore.Spec{}, nil),
		storeOf[*unstructured.Unstructured](fxstore.Spec{Kind: widgets}, nil),
	)
	begin := time.Now()
	err := app.Start(t.Context())
	require.Error(t, err)
	assert.Less(t, time.Since(begin), 10*time.Second, "well under the 2m sync timeout")
	assert.Contains(t, err.Error(), "store Widget.example.com/v1 (all namespaces, unstructured): kind not served by the API server; is the CRD installed?")
	assert.NotContains(t, err.Error(), "ConfigMap", "only the failing store is named")
}

// failingTransport answers every request for one resource with 500, so its
// store never syncs while the others do.
type failingTransport struct {
	next     http.RoundTripper
	resource string
}

func (f failingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/"+f.resource) {
		return &http.Response{
			StatusCode: http.StatusInternalServerError,
			Header:     http.Header{"Content-Type": []string{"application/json"}},
			Body:       io.NopCloser(strings.NewReader(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected failure","reason":"InternalError","code":500}`)),
			Request:    req,
		}, nil
	}
	return f.next.RoundTrip(req)
}

// A store that cannot sync within the sync timeout is named, with its last
// list/watch error, and the stores that did sync are not.
func TestSyncTimeoutNamesStoreAndLastError(t *testing.T) {
	cfg := testenv.Config(t)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return failingTransport{rt, "secrets"} }
	app := testenv.App(t, cfg, lifecycle.Config{SyncTimeout: 3 * time.Second}, zaptest.NewLogger(t),
		storeOf[*corev1.ConfigMap](fxstore.Spec{}, nil),
		storeOf[*corev1.Secret](fxstore.Spec{Namespace: "default"}, nil),
	)
	err := app.Start(t.Context())
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "stores did not sync within the sync timeout of 3s")
	assert.Contains(t, msg, `store Secret/v1 (namespace "default"): not synced; last list/watch error:`)
	assert.Contains(t, msg, "injected failure")
	assert.NotContains(t, msg, "ConfigMap")
}

// slowTransport delays every request for one resource.
type slowTransport struct {
	next     http.RoundTripper
	resource string
	delay    time.Duration
}

func (s slowTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/"+s.resource) {
		select {
		case <-time.After(s.delay):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return s.next.RoundTrip(req)
}

// /readyz is 500 while stores sync, 200 once they have and runnables run,
// and 500 again as soon as stop begins.
func TestReadinessAcrossStartAndStop(t *testing.T) {
	cfg := testenv.Config(t)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return slowTransport{rt, "secrets", time.Second}
	}
	probes := testenv.LoopbackAddr(t)
	var duringStop atomic.Int32
	app := testenv.App(t, cfg, lifecycle.Config{HealthProbeBindAddress: probes}, zaptest.NewLogger(t),
		storeOf[*corev1.Secret](fxstore.Spec{}, nil),
		lifecycle.Runnables(manager.RunnableFunc(func(ctx context.Context) error {
			<-ctx.Done()
			duringStop.Store(int32(testenv.Status(probes, "/readyz")))
			return nil
		})),
	)
	started := make(chan error, 1)
	go func() { started <- app.Start(t.Context()) }()
	require.Eventually(t, func() bool { return testenv.Status(probes, "/healthz") == http.StatusOK }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, http.StatusInternalServerError, testenv.Status(probes, "/readyz"), "not ready while syncing")
	require.NoError(t, <-started)
	assert.Equal(t, http.StatusOK, testenv.Status(probes, "/readyz"))
	require.NoError(t, app.Stop(t.Context()))
	assert.Equal(t, int32(http.StatusInternalServerError), duringStop.Load(), "not ready once stop begins")
	assert.Equal(t, 0, testenv.Status(probes, "/readyz"), "servers closed")
}

// Two replicas with leader election: both sync their stores, only the leader
// runs runnables, and when it stops the other takes over within the lease
// duration.
func TestLeaderElectionHandsOver(t *testing.T) {
	le := lifecycle.LeaderElection{
		Enabled: true, Namespace: "default", Name: "fxkube-test",
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
	}
	type replica struct {
		app     *fxtest.App
		running atomic.Bool
		store   *fxstore.Store[*corev1.ConfigMap]
	}
	newReplica := func(id string) *replica {
		r := &replica{}
		le := le
		le.Identity = id
		r.app = testenv.App(t, testenv.Config(t), lifecycle.Config{LeaderElection: le}, zaptest.NewLogger(t),
			storeOf[*corev1.ConfigMap](fxstore.Spec{}, &r.store),
			lifecycle.Runnables(manager.RunnableFunc(func(ctx context.Context) error {
				r.running.Store(true)
				<-ctx.Done()
				r.running.Store(false)
				return nil
			})),
		)
		return r
	}
	a, b := newReplica("a"), newReplica("b")
	a.app.RequireStart()
	require.Eventually(t, a.running.Load, 10*time.Second, 50*time.Millisecond, "the first replica leads")
	b.app.RequireStart()
	assert.True(t, b.store.HasSynced(), "the standby's stores are warm")
	time.Sleep(2 * le.RetryPeriod)
	assert.False(t, b.running.Load(), "the standby runs nothing")

	stopped := time.Now()
	a.app.RequireStop()
	assert.False(t, a.running.Load())
	require.Eventually(t, b.running.Load, le.LeaseDuration, 50*time.Millisecond, "the standby takes over within the lease duration")
	t.Logf("handover took %s", time.Since(stopped))
	b.app.RequireStop()
}

// A user without list permission on one store: start fails at once, naming
// the store, the verb, the user and "forbidden", and not the stores it may
// read.
func TestStartFailsAtOnceWhenForbidden(t *testing.T) {
	admin := testenv.Config(t)
	kube, err := kubernetes.NewForConfig(admin)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	// alice may read Secrets in ns, and nothing else.
	_, err = kube.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "alice"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	app := testenv.App(t, testenv.User(t, "alice"), lifecycle.Config{}, zaptest.NewLogger(t),
		storeOf[*corev1.Secret](fxstore.Spec{Namespace: ns}, nil),
		storeOf[*corev1.ConfigMap](fxstore.Spec{LabelSelector: "app=web"}, nil),
	)
	begin := time.Now()
	err = app.Start(t.Context())
	require.Error(t, err)
	assert.Less(t, time.Since(begin), 10*time.Second, "well under the 2m sync timeout")
	msg := err.Error()
	t.Log(msg)
	assert.Contains(t, msg, `store ConfigMap/v1 (all namespaces, labels "app=web"): forbidden: user "alice" cannot list or watch configmaps at cluster scope`)
	assert.NotContains(t, msg, "Secret")
}

// barrierReconciler records, at each reconcile, whether the Secrets store it
// reads had synced.
type barrierReconciler struct {
	secrets    *fxstore.Store[*corev1.Secret]
	reconciles atomic.Int32
	unsynced   atomic.Int32
	secretsN   atomic.Int32
}

func (r *barrierReconciler) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	n, err := r.secrets.Count()
	if errors.Is(err, fxstore.ErrNotSynced) {
		r.unsynced.Add(1)
	}
	r.secretsN.Store(int32(n))
	r.reconciles.Add(1) // last: the test reads the others once it sees this
	return reconcile.Result{}, nil
}

// A controller whose reconciler reads a second, slow store never sees it
// unsynced: its first reconcile comes after that store has synced.
func TestControllersNeverSeeUnsyncedStores(t *testing.T) {
	admin := testenv.Config(t)
	kube, err := kubernetes.NewForConfig(admin)
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	for i := range 200 {
		_, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%03d", i)},
			Data:       map[string][]byte{"k": []byte(strings.Repeat("x", 1024))},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trigger"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	cfg := testenv.Config(t)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return slowTransport{rt, "secrets", 2 * time.Second}
	}
	rec := &barrierReconciler{}
	app := testenv.App(t, cfg, lifecycle.Config{}, zaptest.NewLogger(t),
		fxcontroller.Module,
		fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
			cms, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: ns})
			if err != nil {
				return nil, err
			}
			if rec.secrets, err = fxstore.For[*corev1.Secret](r, fxstore.Spec{Namespace: ns}); err != nil {
				return nil, err
			}
			return fxcontroller.New("barrier", cms, rec)
		}),
	)
	app.RequireStart()
	defer app.RequireStop()
	require.Eventually(t, func() bool { return rec.reconciles.Load() > 0 }, 10*time.Second, 10*time.Millisecond)
	assert.Zero(t, rec.unsynced.Load(), "no reconcile saw the Secrets store unsynced")
	assert.Equal(t, int32(200), rec.secretsN.Load(), "the first reconcile saw every Secret")
}
