//go:build linux

package app_test

import (
	"cmp"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fxkube/fxkube/internal/controlplane"
	"github.com/fxkube/fxkube/internal/testenv"
)

// Ctrl-C, which a terminal sends to the whole foreground process group,
// stops the local command cleanly, and `make run` with it: the app stops
// its kube-apiserver and etcd, which live in process groups of their own,
// exits 0 and prints no error, and make reports none.
func TestLocalStopsCleanlyOnCtrlC(t *testing.T) {
	dir, err := controlplane.AssetsDir()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "fxkube-local")
	// As `make run` builds it, so that make finds it up to date.
	build := exec.CommandContext(t.Context(), "go", "build", "-tags", "local", "-o", bin, production)
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	local := func(t *testing.T, probes string, metrics ...string) []string {
		return []string{"--metrics-bind-address", cmp.Or(strings.Join(metrics, ""), "0"), "--health-probe-bind-address", probes,
			"--kubeconfig-out", filepath.Join(t.TempDir(), "kubeconfig")}
	}

	t.Run("ready", func(t *testing.T) {
		probes := testenv.LoopbackAddr(t)
		// With metrics served, controller-runtime's metrics server logs
		// under the name it gives itself.
		args := local(t, probes, testenv.LoopbackAddr(t))
		cmd := exec.Command(bin, append([]string{"local", "--controlplane-dir", dir, "--log-format", "console"}, args...)...)
		out, err := interrupt(t, cmd, func([]testenv.Process) bool { return testenv.Status(probes, "/readyz") == http.StatusOK })
		require.NoError(t, err, "exit status; output:\n%s", out)
		assertNoErrorLines(t, out)
		assert.Contains(t, out, "stopping")
		assert.Contains(t, out, "\tcontroller-runtime.metrics\t", "controller-runtime's own logs, named by it")
		assert.NotContains(t, out, "controller-runtime.controller-runtime", "named once")
	})

	// With --replicas, the other replicas run from the same binary, share
	// the sharded controller's buckets, and stop with it.
	t.Run("replicas", func(t *testing.T) {
		probes := pairedLoopbackAddr(t)
		args := local(t, probes)
		kubeconfig := args[len(args)-1]
		cmd := exec.Command(bin, append([]string{"local", "--controlplane-dir", dir, "--replicas", "2"}, args...)...)
		out, err := interrupt(t, cmd, func([]testenv.Process) bool {
			// Both replicas hold a member Lease of the checksum
			// controller's group.
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return false
			}
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return false
			}
			leases, err := kube.CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{LabelSelector: "fxkube.io/shard=fxkube"})
			if err != nil {
				return false
			}
			members := 0
			for _, l := range leases.Items {
				if strings.Contains(l.Name, "-member-") {
					members++
				}
			}
			return members == 2
		})
		require.NoError(t, err, "exit status; output:\n%s", out)
		assert.Equal(t, 2, strings.Count(out, `"msg":"joined"`), "both replicas joined the checksum controller's group; output:\n%s", out)
		assert.Equal(t, 2, strings.Count(out, `"msg":"left"`), "both left it")
		assert.Equal(t, 2, strings.Count(out, `"msg":"stopped"`), "both stopped")
	})

	// A replica that exits on its own stops the others and the control
	// plane, and the command fails naming it.
	t.Run("replica exits", func(t *testing.T) {
		probes := pairedLoopbackAddr(t)
		cmd := exec.Command(bin, append([]string{"local", "--controlplane-dir", dir, "--replicas", "2"}, local(t, probes)...)...)
		var out testenv.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.WaitDelay = time.Minute // for a control plane left behind, holding the output
		require.NoError(t, cmd.Start())
		var waitErr error
		exited := make(chan struct{}) // closed once waitErr is set
		go func() { waitErr = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			select {
			case <-exited:
			default:
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		})

		replica := nthAddr(t, probes, 1)
		require.Eventually(t, func() bool { return testenv.Status(replica, "/readyz") == http.StatusOK }, 2*time.Minute, 50*time.Millisecond,
			"the replica is ready; output:\n%s", &out)
		var plane []testenv.Process
		for _, p := range testenv.Descendants(t, cmd.Process.Pid) {
			switch p.Name {
			case filepath.Base(bin):
				require.NoError(t, syscall.Kill(p.PID, syscall.SIGKILL), "kill the replica")
			case controlplane.APIServer, controlplane.Etcd:
				plane = append(plane, p)
			}
		}
		require.NotEmpty(t, plane)
		select {
		case <-exited:
			require.Error(t, waitErr, "output:\n%s", &out)
		case <-time.After(2 * time.Minute):
			t.Fatalf("still running 2m after its replica was killed; output:\n%s", &out)
		}
		assert.Regexp(t, `a replica exited before it was stopped: replica 1 \(pid \d+\): signal: killed`, out.String())
		for _, p := range plane {
			assert.False(t, p.Alive(), "%s (pid %d) outlived the app", p.Name, p.PID)
		}
	})

	// Interrupted while kube-apiserver and etcd start, it waits for them to
	// be up, stops them and exits 0.
	t.Run("starting", func(t *testing.T) {
		cmd := exec.Command(bin, append([]string{"local", "--controlplane-dir", dir, "--log-format", "console"}, local(t, testenv.LoopbackAddr(t))...)...)
		// Judged on what interrupt saw: etcd may come and go between two
		// looks at the process tree.
		out, err := interrupt(t, cmd, func(plane []testenv.Process) bool {
			return slices.ContainsFunc(plane, func(p testenv.Process) bool { return p.Name == controlplane.Etcd })
		})
		require.NoError(t, err, "exit status; output:\n%s", out)
		assertNoErrorLines(t, out)
		assert.NotContains(t, out, "export KUBECONFIG", "the app stopped before it ran")
	})

	// --feature-gates adds to ShardedListAndWatch=true, or turns it off;
	// kube-apiserver refuses a gate it does not know, and the error names
	// the gates it was given.
	t.Run("feature gates", func(t *testing.T) {
		for _, tt := range []struct{ give, want string }{
			{give: "NoSuchGate=true", want: "--feature-gates=NoSuchGate=true,ShardedListAndWatch=true"},
			{give: "ShardedListAndWatch=false,NoSuchGate=true", want: "--feature-gates=NoSuchGate=true,ShardedListAndWatch=false"},
			{give: "NoSuchGate", want: `invalid argument "NoSuchGate" for "--feature-gates" flag`},
		} {
			cmd := exec.CommandContext(t.Context(), bin, append([]string{"local", "--controlplane-dir", dir, "--feature-gates", tt.give}, local(t, testenv.LoopbackAddr(t))...)...)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "--feature-gates %s; output:\n%s", tt.give, out)
			assert.Contains(t, string(out), tt.want, "--feature-gates %s", tt.give)
		}
	})

	t.Run("make run", func(t *testing.T) {
		require.NoError(t, controlplane.Check(controlplane.Dir()), "make run uses the cache's binaries")
		probes := testenv.LoopbackAddr(t)
		cmd := exec.Command("make", "--no-print-directory", "run", "LOCAL_APP="+bin, "ARGS="+strings.Join(local(t, probes), " "))
		cmd.Dir = ".."
		// As if typed in a terminal, not run by the make of `make test`.
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			name, _, _ := strings.Cut(kv, "=")
			return name == "MAKEFLAGS" || name == "MAKELEVEL" || name == "MFLAGS"
		})
		out, err := interrupt(t, cmd, func([]testenv.Process) bool { return testenv.Status(probes, "/readyz") == http.StatusOK })
		// make, interrupted, ends itself with the signal once its recipe has
		// ended; had the recipe failed, it would say so first.
		var exit *exec.ExitError
		if err != nil {
			require.ErrorAs(t, err, &exit, "output:\n%s", out)
			ws := exit.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGINT, "%v; output:\n%s", err, out)
		}
		assertNoErrorLines(t, out)
		assert.Contains(t, out, "stopping")
	})
}

// interrupt starts cmd in a process group of its own, waits until when is
// true of the kube-apiservers and etcds seen under it so far, sends SIGINT
// to the group and returns what cmd printed and how it exited. The control
// plane that cmd started must be gone by then.
func interrupt(t *testing.T, cmd *exec.Cmd, when func(plane []testenv.Process) bool) (string, error) {
	t.Helper()
	var out testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var (
		ended bool // whether exited has been received from
		err   error
	)
	// Every kube-apiserver and etcd seen under cmd, which must be gone when
	// it has exited.
	var plane []testenv.Process
	watch := func() {
		for _, p := range testenv.Descendants(t, cmd.Process.Pid) {
			if (p.Name == controlplane.APIServer || p.Name == controlplane.Etcd) && !slices.Contains(plane, p) {
				plane = append(plane, p)
			}
		}
	}
	defer func() {
		// Whatever failed, leave no process behind.
		if !ended {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Logf("killed %s: %v", cmd.Path, <-exited)
		}
		for _, p := range plane {
			if p.Alive() {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	}()

	deadline := time.Now().Add(2 * time.Minute)
	for watch(); !when(plane); watch() {
		select {
		case err = <-exited:
			ended = true
			t.Fatalf("exited before it was interrupted: %v; output:\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "not ready within 2m; output:\n%s", out.String())
	}
	require.NotEmpty(t, plane, "a kube-apiserver or etcd runs under %s", cmd.Path)
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	for deadline := time.After(2 * time.Minute); !ended; {
		select {
		case err = <-exited:
			ended = true
		case <-time.After(50 * time.Millisecond):
			watch()
		case <-deadline:
			t.Fatalf("still running 2m after SIGINT; output:\n%s", out.String())
		}
	}
	for _, p := range plane {
		assert.False(t, p.Alive(), "%s (pid %d) outlived the app", p.Name, p.PID)
	}
	return out.String(), err
}

// assertNoErrorLines asserts that no line of out is an error: not a log
// entry at level ERROR or above, not an "Error:" from the command line, not
// go's or make's report of a failed command.
func assertNoErrorLines(t *testing.T, out string) {
	t.Helper()
	for line := range strings.Lines(out) {
		fields := strings.Split(line, "\t")
		if len(fields) > 1 {
			assert.NotContains(t, []string{"ERROR", "DPANIC", "PANIC", "FATAL"}, fields[1], "error logged: %s", line)
		}
		for _, bad := range []string{"Error:", "exit status", "make: ***"} {
			assert.NotContains(t, line, bad, "an error line")
		}
	}
}

// pairedLoopbackAddr returns a loopback address whose port and the next
// were both free: local --replicas gives its first replica the next port.
func pairedLoopbackAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		addr := testenv.LoopbackAddr(t)
		l, err := net.Listen("tcp", nthAddr(t, addr, 1))
		if err == nil {
			require.NoError(t, l.Close())
			return addr
		}
	}
	t.Fatal("no two consecutive free ports on 127.0.0.1 in 100 tries")
	return ""
}

// nthAddr returns addr with its port plus n.
func nthAddr(t *testing.T, addr string, n int) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return net.JoinHostPort(host, strconv.Itoa(p+n))
}
