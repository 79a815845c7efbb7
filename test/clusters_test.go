package test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/fleet"
)

// A fleet of four members: two that work, one whose user may read
// nothing, and one that no request reaches. The fleet controller copies a
// ConfigMap of the app's own cluster into both working members, keeps the
// copies equal to it, and deletes them with it. The two broken members
// fail alone, each named with its cause, and the app is ready
// throughout. A member that leaves is forgotten; the others go on.
func TestFleetAcrossClusters(t *testing.T) {
	ctx := t.Context()
	own := testenv.Config(t)
	ownKube := kubernetes.NewForConfigOrDie(own)
	cps := testenv.Members(t, 2)
	locked, err := cps[0].AddUser("nobody")
	require.NoError(t, err)
	away := &rest.Config{Host: "https://" + testenv.LoopbackAddr(t), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	members := map[fxcluster.ClusterName]*rest.Config{"east": cps[0].Config, "west": cps[1].Config, "locked": locked, "away": away}
	kubes := map[fxcluster.ClusterName]kubernetes.Interface{
		"east": kubernetes.NewForConfigOrDie(cps[0].Config),
		"west": kubernetes.NewForConfigOrDie(cps[1].Config),
	}

	probes := testenv.LoopbackAddr(t)
	f, leave := startFleetApp(t, members, lifecycle.Config{HealthProbeBindAddress: probes}, zap.InfoLevel)

	ns := testenv.Namespace(t, ownKube, "fleet")
	source := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{fleet.SourceLabel: "true", "team": "a"}},
		Data:       map[string]string{"level": "1"},
	}
	_, err = ownKube.CoreV1().ConfigMaps(ns).Create(ctx, source, metav1.CreateOptions{})
	require.NoError(t, err)

	copyIn := func(name fxcluster.ClusterName) (*corev1.ConfigMap, error) {
		return kubes[name].CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	}
	requireCopies := func(level string) {
		t.Helper()
		for _, name := range []fxcluster.ClusterName{"east", "west"} {
			requireCopy(t, kubes[name], string(name), ns, level, time.Minute, func(c *assert.CollectT, cm *corev1.ConfigMap) {
				assert.Equal(c, map[string]string{fleet.CopyLabel: "true", "team": "a"}, cm.Labels)
			})
		}
	}
	requireCopies("1")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		events, err := kubes["east"].EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if assert.NoError(c, err) && assert.Len(c, events.Items, 1) {
			e := events.Items[0]
			assert.Equal(c, "Copied", e.Reason)
			assert.Equal(c, fleet.Controller, e.ReportingController)
			assert.Equal(c, "settings", e.Regarding.Name)
		}
	}, time.Minute, 100*time.Millisecond, "the Copied Event in east")

	// The broken members fail alone, named with their causes.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		states := map[fxcluster.ClusterName]fxcluster.ClusterInfo{}
		for _, info := range f.Clusters() {
			states[info.Name] = info
		}
		assert.Equal(c, fxcluster.Ready, states["east"].State)
		assert.Equal(c, fxcluster.Ready, states["west"].State)
		if assert.Equal(c, fxcluster.Failed, states["locked"].State) {
			assert.ErrorContains(c, states["locked"].Err, "forbidden")
		}
		if assert.Equal(c, fxcluster.Failed, states["away"].State) {
			assert.ErrorContains(c, states["away"].Err, away.Host)
		}
	}, time.Minute, 100*time.Millisecond)
	assert.Equal(t, 200, testenv.Status(probes, "/readyz"))

	// A change to the source reaches every copy; an edit of a copy is
	// undone.
	source.Data = map[string]string{"level": "2"}
	_, err = ownKube.CoreV1().ConfigMaps(ns).Update(ctx, source, metav1.UpdateOptions{})
	require.NoError(t, err)
	requireCopies("2")
	edited, err := copyIn("east")
	require.NoError(t, err)
	edited.Data = map[string]string{"level": "edited"}
	_, err = kubes["east"].CoreV1().ConfigMaps(ns).Update(ctx, edited, metav1.UpdateOptions{})
	require.NoError(t, err)
	requireCopies("2")

	// West leaves: the fleet forgets it, and east goes on.
	leave("west")
	require.Eventually(t, func() bool {
		for _, info := range f.Clusters() {
			if info.Name == "west" {
				return false
			}
		}
		return true
	}, time.Minute, 100*time.Millisecond, "west has left")
	_, err = f.GetCluster(ctx, "west")
	require.ErrorIs(t, err, fxcluster.ErrClusterNotFound)

	require.NoError(t, ownKube.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := copyIn("east")
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "the copy in east is deleted with its source")
	// West, gone, keeps its copy.
	_, err = copyIn("west")
	require.NoError(t, err)
	assert.Equal(t, 200, testenv.Status(probes, "/readyz"))
}

// A member's API server stops after it joined: that member is failing,
// named with its store and cause, while the other member goes on
// reconciling and the app stays ready. Once the server is back, the
// member is ready again, without joining anew, and catches up.
func TestMemberAPIServerStoppedFailsAloneAndRecovers(t *testing.T) {
	ctx := t.Context()
	own := testenv.Config(t)
	ownKube := kubernetes.NewForConfigOrDie(own)
	cps := testenv.Members(t, 2)
	members := map[fxcluster.ClusterName]*rest.Config{"east": cps[0].Config, "west": cps[1].Config}
	kubes := map[fxcluster.ClusterName]kubernetes.Interface{
		"east": kubernetes.NewForConfigOrDie(cps[0].Config),
		"west": kubernetes.NewForConfigOrDie(cps[1].Config),
	}
	probes := testenv.LoopbackAddr(t)
	f, _ := startFleetApp(t, members, lifecycle.Config{HealthProbeBindAddress: probes}, zap.WarnLevel)

	ns := testenv.Namespace(t, ownKube, "fleet")
	source := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{fleet.SourceLabel: "true"}},
		Data:       map[string]string{"level": "1"},
	}
	_, err := ownKube.CoreV1().ConfigMaps(ns).Create(ctx, source, metav1.CreateOptions{})
	require.NoError(t, err)
	requireCopyIn := func(name fxcluster.ClusterName, level string, within time.Duration) {
		t.Helper()
		requireCopy(t, kubes[name], string(name), ns, level, within)
	}
	requireCopyIn("east", "1", time.Minute)
	requireCopyIn("west", "1", time.Minute)
	state := func(name fxcluster.ClusterName) fxcluster.ClusterInfo {
		for _, info := range f.Clusters() {
			if info.Name == name {
				return info
			}
		}
		return fxcluster.ClusterInfo{}
	}

	stopped := time.Now()
	require.NoError(t, cps[0].StopAPIServer())
	var failing fxcluster.ClusterInfo
	require.Eventually(t, func() bool {
		failing = state("east")
		return failing.State == fxcluster.Failing
	}, time.Minute, 50*time.Millisecond, "east is failing")
	failingAfter := time.Since(stopped)
	require.ErrorContains(t, failing.Err, `cluster "east"`, "it names the member's store")
	require.ErrorContains(t, failing.Err, "connection refused")
	assert.Equal(t, 1, failing.Attempts, "east has not left")

	// West goes on; the app is ready; east's own check says why.
	source.Data = map[string]string{"level": "2"}
	_, err = ownKube.CoreV1().ConfigMaps(ns).Update(ctx, source, metav1.UpdateOptions{})
	require.NoError(t, err)
	requireCopyIn("west", "2", time.Minute)
	assert.Equal(t, fxcluster.Ready, state("west").State)
	assert.Equal(t, 200, testenv.Status(probes, "/readyz"))
	status, body := testenv.Get(probes, "/readyz/"+fxcluster.CheckName("east"))
	assert.NotEqual(t, 200, status)
	assert.Contains(t, body, "failing")

	restarted := time.Now()
	require.NoError(t, cps[0].StartAPIServer())
	require.Eventually(t, func() bool { return state("east").State == fxcluster.Ready }, time.Minute, 50*time.Millisecond, "east is ready again")
	readyAfter := time.Since(restarted)
	assert.Equal(t, 1, state("east").Attempts, "east recovered without joining anew")
	// Its reconcile of level 2 failed while the server was away, and is
	// retried with controller-runtime's backoff.
	requireCopyIn("east", "2", 2*time.Minute)
	t.Logf("east failing %s after its API server stopped; ready %s after it was started again, and caught up %s after",
		failingAfter.Round(time.Millisecond), readyAfter.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
}

// requireCopy waits within for the fleet's copy of ConfigMap "settings"
// in ns, at member's kube, to hold level, and for each check to pass on
// it.
func requireCopy(t *testing.T, kube kubernetes.Interface, member, ns, level string, within time.Duration, checks ...func(*assert.CollectT, *corev1.ConfigMap)) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
		if !assert.NoError(c, err) {
			return
		}
		assert.Equal(c, map[string]string{"level": level}, cm.Data)
		for _, check := range checks {
			check(c, cm)
		}
	}, within, 100*time.Millisecond, "the copy in %s", member)
}
