package test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcluster/kubeconfig"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/fleet"
)

// Members join and leave twenty times through kubeconfig Secrets, as
// multicluster-runtime's provider reads them. Each time, the fleet
// controller's copy reaches both members, and once the Secrets go, so do
// the members. Goroutines, the heap after GC and the watches open at each
// member return to their baseline.
func TestMembersJoinAndLeaveThroughSecrets(t *testing.T) {
	ctx := t.Context()
	own := testenv.Config(t)
	ownKube := kubernetes.NewForConfigOrDie(own)
	cps := testenv.Members(t, 2)
	members := map[string]*rest.Config{"east": cps[0].Config, "west": cps[1].Config}
	secrets := testenv.Namespace(t, ownKube, "fleet-secrets")
	ns := testenv.Namespace(t, ownKube, "fleet")

	var f *fxcluster.Fleet
	app := testenv.App(t, own, lifecycle.Config{SyncTimeout: 20 * time.Second},
		zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		fxcluster.Module,
		kubeconfig.ProvideSecrets(kubeconfig.SecretOptions{Namespace: secrets}),
		fleet.Module,
		fx.Populate(&f),
	)
	app.RequireStart()
	defer app.RequireStop()
	_, err := ownKube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{fleet.SourceLabel: "true"}},
		Data:       map[string]string{"level": "1"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// One client per member: a client made per scrape would leave its
	// connections open as it goes.
	kubes := map[string]kubernetes.Interface{}
	for name, cfg := range members {
		kubes[name] = kubernetes.NewForConfigOrDie(cfg)
	}
	cycle := func(i int) {
		t.Helper()
		for name, cfg := range members {
			_, err := ownKube.CoreV1().Secrets(secrets).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: secrets, Name: name, Labels: map[string]string{kubeconfig.DefaultSecretLabel: "true"}},
				Data:       map[string][]byte{kubeconfig.DefaultSecretKey: testenv.Kubeconfig(t, cfg)},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		for name, kube := range kubes {
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
				if assert.NoError(c, err) {
					assert.Equal(c, "1", cm.Data["level"])
				}
			}, time.Minute, 50*time.Millisecond, "cycle %d: the copy in %s", i, name)
			// The next cycle's copy is made anew.
			require.Eventually(t, func() bool {
				return kube.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{}) == nil
			}, time.Minute, 50*time.Millisecond)
		}
		for name := range members {
			require.NoError(t, ownKube.CoreV1().Secrets(secrets).Delete(ctx, name, metav1.DeleteOptions{}))
		}
		require.Eventually(t, func() bool { return len(f.Clusters()) == 0 }, time.Minute, 50*time.Millisecond, "cycle %d: the members left", i)
	}
	measure := func(c *assert.CollectT) clusterFigures {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fig := clusterFigures{goroutines: runtime.NumGoroutine(), heap: m.HeapAlloc, watches: map[string]float64{}}
		for name, kube := range kubes {
			r, err := testenv.ScrapeAPIRequests(ctx, kube.CoreV1().RESTClient(), "configmaps")
			require.NoError(c, err)
			fig.watches[name] = r.OpenWatches
		}
		return fig
	}

	// The first cycles warm what is made once per process.
	for i := range 2 {
		cycle(i)
	}
	var baseline clusterFigures
	require.EventuallyWithT(t, func(c *assert.CollectT) { baseline = measure(c) }, 10*time.Second, 100*time.Millisecond)
	t.Logf("baseline: %d goroutines, %.1f MiB heap after GC, watches open at the members %v", baseline.goroutines, mib(baseline.heap), baseline.watches)
	for i := range 20 {
		cycle(i)
	}
	var after clusterFigures
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		after = measure(c)
		assert.LessOrEqual(c, after.goroutines, baseline.goroutines+2, "goroutines")
		assert.Equal(c, baseline.watches, after.watches, "watches open at the members")
		assert.Less(c, after.heap, baseline.heap+4<<20, "heap after GC")
	}, 30*time.Second, 100*time.Millisecond)
	t.Logf("after 20 joins and leaves: %d goroutines, %.1f MiB heap after GC, watches open at the members %v", after.goroutines, mib(after.heap), after.watches)
	require.Empty(t, f.Clusters(), "no member is left")
}

// clusterFigures are what TestMembersJoinAndLeaveThroughSecrets compares
// to its baseline.
type clusterFigures struct {
	goroutines int
	heap       uint64
	watches    map[string]float64 // ConfigMap watches open at each member
}
