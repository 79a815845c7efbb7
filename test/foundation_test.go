package test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/fxkube/fxkube/internal/controlplane"
	"github.com/fxkube/fxkube/internal/testenv"
)

// TestConfigMapLifecycle drives the control plane through client-go: create,
// update, get, list and watch one ConfigMap.
func TestConfigMapLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	ns := testenv.Namespace(t, cs, "test")
	cms := cs.CoreV1().ConfigMaps(ns)
	selector := metav1.ListOptions{LabelSelector: "test=configmap-lifecycle"}

	list, err := cms.List(ctx, selector)
	require.NoError(t, err)
	require.Empty(t, list.Items)
	// Watch from the list's version so that the watch sees every change after it.
	opts := selector
	opts.ResourceVersion = list.ResourceVersion
	w, err := cms.Watch(ctx, opts)
	require.NoError(t, err)
	defer w.Stop()

	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Labels: map[string]string{"test": "configmap-lifecycle"}},
		Data:       map[string]string{"color": "blue"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, created.UID)
	assert.Equal(t, map[string]string{"color": "blue"}, created.Data)

	created.Data["color"] = "green"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, created.UID, updated.UID)
	assert.NotEqual(t, created.ResourceVersion, updated.ResourceVersion)

	got, err := cms.Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"color": "green"}, got.Data)

	list, err = cms.List(ctx, selector)
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, "settings", list.Items[0].Name)
	assert.Equal(t, map[string]string{"color": "green"}, list.Items[0].Data)

	for _, want := range []struct {
		typ   watch.EventType
		color string
	}{
		{watch.Added, "blue"},
		{watch.Modified, "green"},
	} {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch closed before %s", want.typ)
			require.Equal(t, want.typ, ev.Type, "event: %+v", ev.Object)
			cm, ok := ev.Object.(*corev1.ConfigMap)
			require.True(t, ok, "%s event carries %T", ev.Type, ev.Object)
			assert.Equal(t, "settings", cm.Name)
			assert.Equal(t, map[string]string{"color": want.color}, cm.Data)
		case <-ctx.Done():
			require.FailNow(t, "no watch event", "want %s: %v", want.typ, ctx.Err())
		}
	}
}

// TestKubectl drives the control plane with kubectl as a separate client,
// which also proves that KubeconfigPath and KubectlPath work.
func TestKubectl(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.KubectlPath(t), "version", "--output", "json",
		"--kubeconfig", testenv.KubeconfigPath(t), "--cache-dir", t.TempDir())
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl version: %s", stderr(err))
	t.Logf("kubectl version: %s", out)

	var version struct {
		ClientVersion struct{ GitVersion string }
		ServerVersion struct{ GitVersion string }
	}
	require.NoError(t, json.Unmarshal(out, &version), "kubectl version output: %s", out)
	assert.Equal(t, controlplane.KubernetesVersion, version.ServerVersion.GitVersion)
	assert.Equal(t, controlplane.KubernetesVersion, version.ClientVersion.GitVersion)
}

// TestMetrics checks that the admin config can read the API server's own
// metrics, which later tests count requests with.
func TestMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	require.NoError(t, err)
	assert.Contains(t, string(body), "apiserver_request_total{")
}

func stderr(err error) []byte {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.Stderr
	}
	return nil
}
