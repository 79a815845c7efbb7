package kubebuilder_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/test/kubebuilder/internal/summary"
)

// An operator that adds a cache and a cluster of its own with mgr.Add and
// watches them through raw sources, typed and metadata-only, runs on
// each platform: its sources hear what its caches hold, from the start
// and after. Hosted, the start waited for its warm-up, which waited for
// a cache that started only after the start (the cache never started).
func TestOperatorWithCachesOfItsOwn(t *testing.T) {
	c := newClient(t)
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	for _, p := range platforms {
		if p.name == "fxkube-member" {
			// In a member cluster, an operator's caches of its own are
			// refused (fxcontroller.InEveryMemberCluster says so).
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			ns := testenv.Namespace(t, kube, p.name)
			// Made before the operator starts: its caches list them.
			create(t, c, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "early", Labels: map[string]string{summary.OfLabel: "bundle"}},
				Data:       map[string][]byte{"ca.crt": []byte("a")},
			})
			p.start(t, testenv.Config(t), summary.Setup)

			bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bundle", Labels: map[string]string{summary.BundleLabel: "true"}}}
			create(t, c, bundle)
			eventuallySummary(t, c, bundle, summary.Summary([]string{"ca.crt"}, 0, 0))

			// Each raw source, on its own, makes the operator summarize
			// again.
			create(t, c, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late", Labels: map[string]string{summary.OfLabel: "bundle"}},
				Data:       map[string][]byte{"tls.crt": []byte("b")},
			})
			eventuallySummary(t, c, bundle, summary.Summary([]string{"ca.crt", "tls.crt"}, 0, 0))
			create(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target", Labels: map[string]string{summary.OfLabel: "bundle"}}})
			eventuallySummary(t, c, bundle, summary.Summary([]string{"ca.crt", "tls.crt"}, 1, 0))
			create(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader", Labels: map[string]string{summary.OfLabel: "bundle"}}})
			eventuallySummary(t, c, bundle, summary.Summary([]string{"ca.crt", "tls.crt"}, 1, 1))
		})
	}
}

func create(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	require.NoError(t, c.Create(t.Context(), o), "create %T %s", o, o.GetName())
}

func eventuallySummary(t *testing.T, c client.Client, bundle *corev1.ConfigMap, want string) {
	t.Helper()
	ctx := t.Context()
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		var got corev1.ConfigMap
		if assert.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(bundle), &got)) {
			assert.Equal(t, want, got.Annotations[summary.SummaryAnnotation])
		}
	}, timeout, tick, "the summary of %s", bundle.Name)
}
