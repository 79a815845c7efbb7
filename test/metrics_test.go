package test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// configMapsModule reads every ConfigMap, so that the app has a store whose
// fxkube_store_* series /metrics serves.
var configMapsModule = fx.Module("configmaps", storeOf[*corev1.ConfigMap](fxstore.Spec{}, nil))

// scrape GETs /metrics on the secure metrics server at addr with token (none
// if empty), trusting its self-signed certificate as a scraper configured
// with insecureSkipVerify does.
func scrape(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+"/metrics", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// Secure metrics, as kubebuilder scaffolds them, against the real API
// server: the app, running as a service account with only the RBAC that
// the rbac command prints, has every scrape's token reviewed and its access
// to /metrics reviewed; a scraper needs the metrics-reader ClusterRole.
func TestSecureMetricsAskTheAPIServer(t *testing.T) {
	admin, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	ns := testenv.Namespace(t, admin, "test")
	addr := testenv.LoopbackAddr(t)
	var out bytes.Buffer
	cmd := app.Command("fxkube-metrics", configMapsModule)
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"rbac", "--service-account", ns + "/fxkube", "--metrics-bind-address", addr})
	require.NoError(t, cmd.Execute())
	newKubectl(t).apply(out.String())

	token := func(sa string) string {
		_, err := admin.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
	// Two scrapers: one bound to the metrics-reader ClusterRole the rbac
	// command printed, one not. (Each is asked about once: the app caches
	// a denial for 30 seconds, as controller-runtime's filter does.)
	var reader string
	for doc := range strings.SplitSeq(out.String(), "---\n") {
		var role rbacv1.ClusterRole
		require.NoError(t, yaml.Unmarshal([]byte(doc), &role))
		if role.Kind == "ClusterRole" && strings.HasSuffix(role.Name, "-metrics-reader") {
			reader = role.Name
		}
	}
	require.Equal(t, "fxkube-metrics-metrics-reader", reader, "the rbac command prints a metrics-reader ClusterRole")
	stranger, scraper := token("stranger"), token("scraper")
	binding, err := admin.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fxkube-metrics-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{}))
	})

	user := testenv.User(t, "system:serviceaccount:"+ns+":fxkube", "system:serviceaccounts", "system:serviceaccounts:"+ns)
	running := testenv.App(t, user, lifecycle.Config{MetricsSecure: true, MetricsBindAddress: addr}, zaptest.NewLogger(t), configMapsModule)
	running.RequireStart()
	defer running.RequireStop()

	status, body := scrape(t, addr, "")
	assert.Equal(t, http.StatusUnauthorized, status, "no token: %s", body)
	status, body = scrape(t, addr, stranger)
	assert.Equal(t, http.StatusForbidden, status, "a token without the binding: %s", body)
	assert.Contains(t, body, "Authorization denied for user system:serviceaccount:"+ns+":stranger")
	status, body = scrape(t, addr, scraper)
	require.Equal(t, http.StatusOK, status, "a token with the binding: %s", body)
	assert.Contains(t, body, `fxkube_store_synced{`)
	assert.Contains(t, body, `fxkube_store_objects{`)
}

// On a running app, /readyz?verbose names each check, and pprof serves on
// its own address.
func TestProbesAndPprof(t *testing.T) {
	probes, pprof := testenv.LoopbackAddr(t), testenv.LoopbackAddr(t)
	running := testenv.App(t, testenv.Config(t), lifecycle.Config{HealthProbeBindAddress: probes, PprofBindAddress: pprof}, zaptest.NewLogger(t),
		configMapsModule, lifecycle.Checks(lifecycle.Check{Name: "cache", Readiness: true, Checker: func(*http.Request) error { return nil }}))
	running.RequireStart()
	defer running.RequireStop()

	resp, err := http.Get("http://" + probes + "/readyz?verbose")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	for _, check := range []string{"cache", "runnables", "stores"} {
		assert.Contains(t, string(body), "[+]"+check+" ok\n")
	}
	assert.Equal(t, http.StatusOK, testenv.Status(pprof, "/debug/pprof/goroutine?debug=1"))
	assert.Equal(t, http.StatusNotFound, testenv.Status(probes, "/debug/pprof/"))
}
