package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/yaml"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/mirror"
	"github.com/fxkube/fxkube/modules/rollout"
)

// The RBAC that the rbac command derives from the modules is enough to run
// them as a service account bound only to it; without one of its rules,
// start fails naming the store that rule covered.
func TestRBACFromTheGraphIsEnough(t *testing.T) {
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	k := newKubectl(t)
	var out bytes.Buffer
	cmd := app.Command("fxkube", rollout.Module, mirror.Module)
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"rbac", "--service-account", ns + "/fxkube"})
	require.NoError(t, cmd.Execute())
	k.apply(out.String())

	serviceAccount := "system:serviceaccount:" + ns + ":fxkube"
	user := testenv.User(t, serviceAccount, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	running := testenv.App(t, user, lifecycle.Config{}, zaptest.NewLogger(t), fxcontroller.Module, rollout.Module, mirror.Module)
	running.RequireStart()
	source, target := testenv.Namespace(t, kube, "test"), testenv.Namespace(t, kube, "test")
	k.run(mirrorSourceYAML("ConfigMap", source, target, "data: {color: blue}"), "apply", "-f", "-")
	k.eventually(`{"color":"blue"}`, "get", "configmap", "settings", "-n", target, "--ignore-not-found", "-o", "jsonpath={.data}")
	running.RequireStop()

	// Drop the ClusterRole's rule for Secrets.
	docs := strings.Split(out.String(), "---\n")
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.Unmarshal([]byte(docs[0]), &role))
	n := len(role.Rules)
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "secrets") })
	require.Equal(t, n-1, len(role.Rules), "the ClusterRole has one rule for secrets")
	reduced, err := yaml.Marshal(role)
	require.NoError(t, err)
	k.run(string(reduced), "apply", "-f", "-")

	err = testenv.App(t, user, lifecycle.Config{}, zaptest.NewLogger(t), fxcontroller.Module, rollout.Module, mirror.Module).Start(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(),
		`store Secret/v1 (all namespaces): forbidden: user "`+serviceAccount+`" cannot list or watch secrets at cluster scope`)
	assert.NotContains(t, err.Error(), "ConfigMap")
}

// The binary, sent SIGTERM while running, stops cleanly and exits 0 within
// its stop timeout, and all it prints is structured zap logs.
func TestBinaryExitsZeroOnSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fxkube")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/fxkube/fxkube/cmd/app")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	probes := testenv.LoopbackAddr(t)
	var logs testenv.Buffer
	run := exec.Command(bin, "run", "--kubeconfig", testenv.KubeconfigPath(t),
		"--metrics-bind-address", "0", "--health-probe-bind-address", probes, "--stop-timeout", "10s",
		// Leader election logs through klog, which must come out as zap.
		"--leader-elect", "--leader-election-namespace", "default", "--leader-election-id", "sigterm-test",
		"--shard-namespace", "default")
	run.Stdout, run.Stderr = &logs, &logs
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	defer func() {
		if run.ProcessState == nil {
			_ = run.Process.Kill()
			t.Logf("killed the app: %v", <-exited)
		}
	}()

	require.Eventually(t, func() bool { return testenv.Status(probes, "/readyz") == http.StatusOK }, 30*time.Second, 50*time.Millisecond,
		"the app becomes ready; its logs:\n%s", &logs)
	require.NoError(t, run.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("exit code %d; logs:\n%s", exit.ExitCode(), logs.String())
		}
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20s after SIGTERM; logs:\n%s", logs.String())
	}
	assert.Contains(t, logs.String(), `"stopping"`)
	assert.Contains(t, logs.String(), `"msg":"Go's memory limit`, "the memory limit in force is logged at start")
	// Every line the process printed is zap's JSON: controller-runtime's
	// logr, client-go's klog and fx's own events all go through zap.
	assert.Contains(t, logs.String(), `"logger":"client-go"`, "klog's leader election lines came through zap")
	for line := range strings.Lines(logs.String()) {
		var entry map[string]any
		if assert.NoError(t, json.Unmarshal([]byte(line), &entry), "not a JSON log line: %q", line) {
			assert.Contains(t, entry, "logger", line)
		}
	}
}

// A SIGTERM that arrives as the app's start ends stops it cleanly: sent by
// a runnable, which the start runs just before it returns, the signal comes
// too late to cancel the start, and the app stops once started. (Before, a
// signal between the start's last look at its context and fx's relay of
// signals was taken and never acted on: the app ran on until killed.) The
// signal is sent to this test's process, which the app running in it takes.
func TestSIGTERMWhileStartingStopsTheApp(t *testing.T) {
	for round := range 5 {
		stopped := make(chan struct{})
		signals := lifecycle.Runnables(manager.RunnableFunc(func(ctx context.Context) error {
			defer close(stopped)
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		}))
		cmd := app.Command("fxkube-sigterm", configMapsModule, signals)
		cmd.SetArgs([]string{"run", "--kubeconfig", testenv.KubeconfigPath(t),
			"--metrics-bind-address", "0", "--health-probe-bind-address", testenv.LoopbackAddr(t)})
		exited := make(chan error, 1)
		go func() { exited <- cmd.Execute() }()
		select {
		case err := <-exited:
			require.NoError(t, err, "round %d", round)
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: still running 30s after SIGTERM", round)
		}
		select {
		case <-stopped:
		default:
			t.Fatalf("round %d: the app returned with its runnable still running", round)
		}
	}
}

// Outside a cluster, with no namespace flag, the binary puts the Leases of
// leader election and sharding in the kubeconfig context's namespace, as
// kubectl would: `run --kubeconfig` works as the README says, sharded
// module and all. (It failed: "sharding needs the Leases' namespace".)
func TestRunOutsideAClusterTakesTheKubeconfigNamespace(t *testing.T) {
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	ns := testenv.Namespace(t, kube, "test")
	kubeconfig, err := clientcmd.LoadFromFile(testenv.KubeconfigPath(t))
	require.NoError(t, err)
	kubeconfig.Contexts[kubeconfig.CurrentContext].Namespace = ns
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kubeconfig, path))

	bin := filepath.Join(t.TempDir(), "fxkube")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/fxkube/fxkube/cmd/app")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	probes := testenv.LoopbackAddr(t)
	var logs testenv.Buffer
	run := exec.Command(bin, "run", "--kubeconfig", path,
		"--metrics-bind-address", "0", "--health-probe-bind-address", probes,
		"--leader-elect", "--leader-election-id", "kubeconfig-namespace-test")
	run.Stdout, run.Stderr = &logs, &logs
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	var done atomic.Bool
	go func() {
		err := run.Wait()
		done.Store(true)
		exited <- err
	}()
	defer func() {
		_ = run.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			assert.NoError(t, err, "logs:\n%s", &logs)
		case <-time.After(20 * time.Second):
			_ = run.Process.Kill()
			t.Errorf("still running 20s after SIGTERM; logs:\n%s", &logs)
		}
	}()

	require.Eventually(t, func() bool { return done.Load() || testenv.Status(probes, "/readyz") == http.StatusOK }, 60*time.Second, 100*time.Millisecond)
	require.False(t, done.Load(), "the app exited; its logs:\n%s", &logs)
	assert.Contains(t, logs.String(), `"namespace":"`+ns+`"`, "the namespace chosen is logged")
	leases, err := kube.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, l := range leases.Items {
		names = append(names, l.Name)
	}
	assert.Contains(t, names, "kubeconfig-namespace-test", "the leader Lease is in the context's namespace")
	sharding, err := kube.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{LabelSelector: fxshard.LeaseLabel})
	require.NoError(t, err)
	assert.NotEmpty(t, sharding.Items, "the sharding Leases are in the context's namespace: %v", names)
}
