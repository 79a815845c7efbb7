package reliability

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// TestStoreFailsWhenAccessIsRevoked takes the app's access to Secrets away
// while it runs: the Secrets store fails (Err, its health handler, the
// log), and once the store failure timeout has passed /readyz fails,
// naming it. Access given back, the store works again and catches up with
// what was made meanwhile; the ConfigMaps store never failed.
func TestStoreFailsWhenAccessIsRevoked(t *testing.T) {
	ctx := t.Context()
	admin := newClient(t, testenv.Config(t))
	user := "revoked-" + rand.String(5)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}}},
	}
	require.NoError(t, admin.Create(ctx, role))
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	require.NoError(t, admin.Create(ctx, binding))
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		assert.NoError(t, admin.Delete(ctx, binding))
		assert.NoError(t, admin.Delete(ctx, role))
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "revoked-"}}
	require.NoError(t, admin.Create(ctx, ns))

	// The app's watches go through a switchboard, to end them: the API
	// server checks access when a watch starts, not while it streams.
	asUser := testenv.User(t, user)
	cfg := rest.CopyConfig(asUser)
	var board *switchboard
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		board = newSwitchboard(rt)
		return board
	}
	log, logs := newLogger(t, zap.InfoLevel)
	probes := testenv.LoopbackAddr(t)
	const bound = 2 * time.Second
	var (
		configMaps *fxstore.Store[*corev1.ConfigMap]
		secrets    *fxstore.Store[*corev1.Secret]
		heard      testenv.Records[error]
	)
	var registry *fxstore.Registry
	a := testenv.App(t, cfg, lifecycle.Config{HealthProbeBindAddress: probes, StoreFailureTimeout: bound}, log,
		fx.Invoke(func(r *fxstore.Registry) (err error) {
			registry = r
			if configMaps, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}); err != nil {
				return err
			}
			secrets, err = fxstore.For[*corev1.Secret](r, fxstore.Spec{})
			return err
		}),
	)
	a.RequireStart()
	defer a.RequireStop()
	_, err := secrets.Subscribe(fxstore.HandlerFuncs[*corev1.Secret]{HealthFunc: heard.Add})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, statusOf(t, probes, "/readyz"))

	userClient := newClient(t, asUser)
	role.Rules[0].Resources = []string{"configmaps"}
	require.NoError(t, admin.Update(ctx, role))
	revoked := time.Now()
	// Once the authorizer has seen the change, end the watches: the
	// Secrets store lists again, and is refused.
	require.Eventually(t, func() bool {
		err := userClient.List(ctx, &corev1.SecretList{})
		return apierrors.IsForbidden(err)
	}, 30*time.Second, 50*time.Millisecond, "access to Secrets is revoked")
	board.Cut()
	board.Restore()

	// The switchboard refuses requests for an instant: the first error
	// may be "connection refused", the next ones are "forbidden".
	require.Eventually(t, func() bool { return apierrors.IsForbidden(secrets.Err()) }, 30*time.Second, 50*time.Millisecond,
		"the Secrets store fails, forbidden")
	assert.ErrorContains(t, secrets.Err(), "store Secret/v1 (all namespaces): failing since")
	var failing *fxstore.FailingError
	require.ErrorAs(t, secrets.Err(), &failing)
	assert.WithinRange(t, failing.Since, revoked, time.Now())
	assert.NoError(t, configMaps.Err(), "the ConfigMaps store works")

	// Made while the store fails: it catches up once access is back.
	during := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "made-while-failing"}}
	require.NoError(t, admin.Create(ctx, during))

	require.Eventually(t, func() bool { return statusOf(t, probes, "/readyz") == http.StatusInternalServerError },
		bound+30*time.Second, 100*time.Millisecond, "/readyz fails once the store has failed for longer than the bound")
	assert.Equal(t, http.StatusInternalServerError, statusOf(t, probes, "/readyz/stores"), "the stores check is the one failing")
	told := logs.FilterMessageSnippet("store failing for longer than the store failure timeout").All()
	require.Len(t, told, 1, "said once")
	assert.Equal(t, "Secret/v1 (all namespaces)", told[0].ContextMap()["store"])
	assert.Contains(t, told[0].ContextMap()["lastError"], "forbidden")
	assert.Equal(t, 1, logs.FilterMessageSnippet("store failing: its list/watch fails").Len(), "the failure is logged once, not once per retry")
	described := map[string]string{}
	for _, s := range app.NewGraph(registry, nil, nil).Stores {
		described[s.Kind] = s.Failing
	}
	assert.Contains(t, described["Secret"], "failing since", "describe of the running app says so")
	assert.Contains(t, described["Secret"], "forbidden")
	assert.Empty(t, described["ConfigMap"])

	role.Rules[0].Resources = []string{"configmaps", "secrets"}
	require.NoError(t, admin.Update(ctx, role))
	require.Eventually(t, func() bool { return secrets.Err() == nil }, time.Minute, 100*time.Millisecond, "the Secrets store works again")
	require.Eventually(t, func() bool { _, err := secrets.Get(ns.Name, "made-while-failing"); return err == nil },
		10*time.Second, 50*time.Millisecond, "and holds what was made meanwhile")
	assert.Equal(t, http.StatusOK, statusOf(t, probes, "/readyz"))
	assert.Equal(t, 1, logs.FilterMessage("store recovered").Len())

	got := heard.All()
	require.Len(t, got, 2, "the handler heard failing and recovered, once each: %v", got)
	assert.ErrorContains(t, got[0], "store Secret/v1 (all namespaces): failing since", "failing")
	assert.NoError(t, got[1], "recovered")
}
