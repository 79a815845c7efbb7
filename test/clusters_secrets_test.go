package test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
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

// Bad kubeconfig Secrets beside good ones, in a running fleet: one that
// names an exec credential plugin, one that is not a kubeconfig, and two
// that claim one cluster name. Each is refused with a clear log line and
// nothing runs the plugin; the good members join and the fleet
// controller keeps their copies equal to the source.
func TestBadKubeconfigSecretsStopNothing(t *testing.T) {
	ctx := t.Context()
	own := testenv.Config(t)
	ownKube := kubernetes.NewForConfigOrDie(own)
	cps := testenv.Members(t, 2)
	secrets := testenv.Namespace(t, ownKube, "fleet-secrets")
	ns := testenv.Namespace(t, ownKube, "fleet")
	const nameAnnotation = "fleet.example.com/cluster-name"
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()))
	var f *fxcluster.Fleet
	app := testenv.App(t, own, lifecycle.Config{SyncTimeout: 20 * time.Second}, log,
		fxcluster.Module,
		kubeconfig.ProvideSecrets(kubeconfig.SecretOptions{Namespace: secrets, NameAnnotation: nameAnnotation}),
		fleet.Module,
		fx.Populate(&f),
	)
	app.RequireStart()
	defer app.RequireStop()
	source := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{fleet.SourceLabel: "true"}},
		Data:       map[string]string{"level": "1"},
	}
	_, err := ownKube.CoreV1().ConfigMaps(ns).Create(ctx, source, metav1.CreateOptions{})
	require.NoError(t, err)

	ran := filepath.Join(t.TempDir(), "ran")
	execKubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "touch %s"], interactiveMode: Never}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, cps[0].Config.Host, ran)
	put := func(name string, kubeconfigData []byte, claims string) {
		t.Helper()
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: secrets, Name: name, Labels: map[string]string{kubeconfig.DefaultSecretLabel: "true"}},
			Data:       map[string][]byte{kubeconfig.DefaultSecretKey: kubeconfigData},
		}
		if claims != "" {
			s.Annotations = map[string]string{nameAnnotation: claims}
		}
		_, err := ownKube.CoreV1().Secrets(secrets).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	put("east", testenv.Kubeconfig(t, cps[0].Config), "")
	put("exec", []byte(execKubeconfig), "")
	put("garbage", []byte("{not: [a kubeconfig"), "")
	put("twin-a", testenv.Kubeconfig(t, cps[1].Config), "twin")
	put("twin-b", testenv.Kubeconfig(t, cps[1].Config), "twin")
	put("west", testenv.Kubeconfig(t, cps[1].Config), "")

	kubes := map[string]kubernetes.Interface{"east": kubernetes.NewForConfigOrDie(cps[0].Config), "west": kubernetes.NewForConfigOrDie(cps[1].Config)}
	requireCopies := func(level string) {
		t.Helper()
		for name, kube := range kubes {
			requireCopy(t, kube, name, ns, level, time.Minute)
		}
	}
	requireCopies("1")
	refused := func(secret string) []string {
		var lines []string
		for _, e := range logs.FilterMessageSnippet("refused").All() {
			if s, _ := e.ContextMap()["secret"].(string); strings.Contains(s+",", "/"+secret+",") {
				lines = append(lines, fmt.Sprint(e.ContextMap()["error"]))
			}
		}
		return lines
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, name := range []string{"exec", "garbage", "twin-a", "twin-b"} {
			assert.NotEmpty(c, refused(name), "%s is refused, logged", name)
		}
	}, time.Minute, 50*time.Millisecond)
	assert.Contains(t, fmt.Sprint(refused("exec")), "exec credential plugin")
	assert.Contains(t, fmt.Sprint(refused("garbage")), "parse kubeconfig")
	assert.Contains(t, fmt.Sprint(refused("twin-b"))+fmt.Sprint(refused("twin-a")), "twin")
	var engaged []string
	for _, info := range f.Clusters() {
		engaged = append(engaged, string(info.Name))
	}
	assert.ElementsMatch(t, []string{"east", "west"}, engaged, "only the good Secrets' members")
	assert.NoFileExists(t, ran, "the exec plugin never ran")

	// The fleet goes on.
	source.Data = map[string]string{"level": "2"}
	_, err = ownKube.CoreV1().ConfigMaps(ns).Update(ctx, source, metav1.UpdateOptions{})
	require.NoError(t, err)
	requireCopies("2")
}
