package test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcluster/kubeconfig"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/fleet"
)

// The binary's flags name member clusters: --cluster-kubeconfig engages
// the context of a kubeconfig file, and --wait-for-clusters makes the
// start wait for it. With it, the start fails for a member no request
// reaches, naming it; the same member without the flag fails alone.
func TestClusterFlags(t *testing.T) {
	own := testenv.Config(t)
	ownKube := kubernetes.NewForConfigOrDie(own)
	east := testenv.Members(t, 1)[0]
	dir := t.TempDir()
	eastFile := filepath.Join(dir, "east")
	require.NoError(t, os.WriteFile(eastFile, testenv.Kubeconfig(t, east.Config), 0o600))
	awayFile := filepath.Join(dir, "away")
	away := &rest.Config{Host: "https://" + testenv.LoopbackAddr(t)}
	require.NoError(t, os.WriteFile(awayFile, testenv.Kubeconfig(t, away), 0o600))

	run := func(ctx context.Context, probes string, args ...string) <-chan error {
		cmd := app.Command("fxkube-fleet", fleet.Module)
		cmd.SetArgs(append([]string{"run", "--kubeconfig", testenv.KubeconfigPath(t), "--metrics-bind-address", "0",
			"--health-probe-bind-address", probes, "--sync-timeout", "20s", "--log-level", "warn"}, args...))
		exited := make(chan error, 1)
		go func() { exited <- cmd.ExecuteContext(ctx) }()
		return exited
	}

	t.Run("the start waits for a member that joins", func(t *testing.T) {
		ns := testenv.Namespace(t, ownKube, "flags")
		_, err := ownKube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{fleet.SourceLabel: "true"}},
			Data:       map[string]string{"level": "1"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		probes := testenv.LoopbackAddr(t)
		exited := run(ctx, probes, "--cluster-kubeconfig", "east="+eastFile, "--wait-for-clusters")
		require.Eventually(t, func() bool { return testenv.Status(probes, "/readyz") == 200 }, time.Minute, 50*time.Millisecond)
		code, body := testenv.Get(probes, "/readyz/cluster-east")
		assert.Equal(t, 200, code, "ready means east has joined: %s", body)
		eastKube := kubernetes.NewForConfigOrDie(east.Config)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cm, err := eastKube.CoreV1().ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
			if assert.NoError(c, err) {
				assert.Equal(c, "1", cm.Data["level"])
			}
		}, time.Minute, 50*time.Millisecond, "the copy in east")
		cancel()
		require.NoError(t, <-exited)
	})

	t.Run("the start fails for a member that cannot join", func(t *testing.T) {
		err := <-run(t.Context(), testenv.LoopbackAddr(t), "--cluster-kubeconfig", "east="+eastFile,
			"--cluster-kubeconfig", "away="+awayFile, "--wait-for-clusters")
		require.ErrorContains(t, err, "exit code 1", "the start fails; the log says why")
		// What the flags build, run as an fx app, to read the error.
		files := kubeconfig.Files{{Name: "east", Path: eastFile}, {Name: "away", Path: awayFile}}
		err = testenv.App(t, own, lifecycle.Config{SyncTimeout: 20 * time.Second}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
			fxcluster.Module,
			kubeconfig.ProvideFiles(kubeconfig.FileOptions{Files: files}),
			fx.Supply(fxcluster.Options{WaitFor: []fxcluster.ClusterName{"east", "away"}}),
			fleet.Module,
		).Start(t.Context())
		require.Error(t, err)
		assert.Contains(t, err.Error(), `cluster "away"`)
		assert.Contains(t, err.Error(), away.Host)
		assert.Contains(t, err.Error(), "--wait-for-clusters")
		assert.NotContains(t, err.Error(), `cluster "east"`)
	})

	t.Run("without waiting, a member that cannot join fails alone", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		probes := testenv.LoopbackAddr(t)
		exited := run(ctx, probes, "--cluster-kubeconfig", "away="+awayFile)
		require.Eventually(t, func() bool { return testenv.Status(probes, "/readyz") == 200 }, time.Minute, 50*time.Millisecond)
		assert.Equal(t, 500, testenv.Status(probes, "/readyz/cluster-away"))
		cancel()
		require.NoError(t, <-exited)
	})
}

// describe --cluster checks each member --cluster-kubeconfig names as it
// would join, without running the app: a member whose stores may be
// listed and watched is ready; one whose user may read nothing, and one
// no request reaches, are failed, each named with its cause.
func TestDescribeChecksMemberClusters(t *testing.T) {
	member := testenv.Members(t, 1)[0]
	locked, err := member.AddUser("nobody")
	require.NoError(t, err)
	dir := t.TempDir()
	files := map[string]*rest.Config{
		"east":   member.Config,
		"locked": locked,
		"away":   {Host: "https://" + testenv.LoopbackAddr(t), TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
	}
	args := []string{"describe", "--cluster", "-o", "json", "--kubeconfig", testenv.KubeconfigPath(t), "--shard-namespace", "default"}
	for name, cfg := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, testenv.Kubeconfig(t, cfg), 0o600))
		args = append(args, "--cluster-kubeconfig", name+"="+path)
	}
	cmd := app.Command("fxkube-fleet", fleet.Module)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(args)
	require.NoError(t, cmd.ExecuteContext(t.Context()))
	var g app.Graph
	require.NoError(t, json.Unmarshal(out.Bytes(), &g), out.String())
	require.NotNil(t, g.Clusters)
	members := map[string]app.Member{}
	for _, m := range g.Clusters.Members {
		members[m.Name] = m
	}
	require.Len(t, members, 3)
	assert.Equal(t, "ready", members["east"].State, members["east"].Error)
	require.Len(t, members["east"].Stores, 1)
	assert.Equal(t, `ConfigMap/v1 (cluster "east", all namespaces, labels "fxkube.io/fleet-copy=true")`, members["east"].Stores[0].Key)
	assert.Equal(t, "failed", members["locked"].State)
	assert.Contains(t, members["locked"].Error, "forbidden")
	assert.Equal(t, "failed", members["away"].State)
	assert.Contains(t, members["away"].Error, files["away"].Host)
}
