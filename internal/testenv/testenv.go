package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/internal/controlplane"
)

// running is the control plane of this test binary, set while the tests run.
var running *env

type env struct {
	cp         *controlplane.Running
	kubeconfig string // path of a kubeconfig file for the admin
	kubectl    string // path of the kubectl binary
	tmp        string // holds kubeconfig
}

// WithControlPlane wraps m so that its Run starts a control plane with opts,
// such as [controlplane.WithFeatureGates], runs the tests, and stops the
// control plane. When the control plane cannot start, Run reports why on
// stderr and returns 1 without running any test.
func WithControlPlane(m *testing.M, opts ...controlplane.Option) interface{ Run() int } {
	return runner{m: m, opts: opts}
}

type runner struct {
	m    *testing.M
	opts []controlplane.Option
}

func (r runner) Run() int {
	e, err := start(r.opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: start control plane: %v\n", err)
		return 1
	}
	running = e
	code := r.m.Run()
	running = nil
	if err := e.stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Config returns a copy of the admin client config of the running control
// plane; callers may change it.
func Config(tb testing.TB) *rest.Config {
	tb.Helper()
	return rest.CopyConfig(current(tb).cp.Config)
}

// User returns a client config for a user of the running control plane with
// the given name and groups, authenticated by a client certificate. The user
// may do only what RBAC grants it.
func User(tb testing.TB, name string, groups ...string) *rest.Config {
	tb.Helper()
	cfg, err := current(tb).cp.AddUser(name, groups...)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// LoopbackAddr returns a 127.0.0.1 address whose port was free, for a
// server a test starts (probes, metrics). It needs no control plane.
func LoopbackAddr(tb testing.TB) string {
	tb.Helper()
	addr, err := controlplane.LoopbackAddr()
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}

// KubeconfigPath returns the path of a kubeconfig file for the admin user of
// the running control plane, for clients such as kubectl. Tests must not
// change the file.
func KubeconfigPath(tb testing.TB) string {
	tb.Helper()
	return current(tb).kubeconfig
}

// KubectlPath returns the path of the kubectl binary built with the control
// plane, whose version matches the API server's.
func KubectlPath(tb testing.TB) string {
	tb.Helper()
	return current(tb).kubectl
}

// ControlPlane returns the running control plane itself, for tests that
// inject faults into it (see controlplane.Running.StopAPIServer). Such tests
// belong in a package of their own, as every test of the binary shares it.
func ControlPlane(tb testing.TB) *controlplane.Running {
	tb.Helper()
	return current(tb).cp
}

func current(tb testing.TB) *env {
	tb.Helper()
	if running == nil {
		tb.Fatal("testenv: no control plane is running; start one in TestMain with " +
			"goleak.VerifyTestMain(testenv.WithControlPlane(m))")
	}
	return running
}

func start(opts []controlplane.Option) (_ *env, err error) {
	dir, err := controlplane.AssetsDir()
	if err != nil {
		return nil, err
	}
	cp, err := controlplane.Start(dir, opts...)
	if err != nil {
		return nil, err
	}
	e := &env{cp: cp, kubectl: filepath.Join(dir, controlplane.Kubectl)}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.stop())
		}
	}()
	if e.tmp, err = os.MkdirTemp("", "fxkube-testenv-"); err != nil {
		return e, err
	}
	e.kubeconfig = filepath.Join(e.tmp, "kubeconfig")
	if err := os.WriteFile(e.kubeconfig, cp.Kubeconfig, 0o600); err != nil {
		return e, fmt.Errorf("write kubeconfig: %w", err)
	}
	return e, nil
}

func (e *env) stop() error {
	err := e.cp.Stop()
	if e.tmp != "" {
		err = errors.Join(err, os.RemoveAll(e.tmp))
	}
	return err
}

// Kubectl runs the control plane's kubectl against it as the admin, as a
// user would, with stdin if not empty and its discovery cache in cacheDir,
// and returns its output; an error carries kubectl's stderr. It does not
// use the test's context, which has ended when cleanups run kubectl.
func Kubectl(tb testing.TB, cacheDir, stdin string, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	full := append([]string{"--kubeconfig", KubeconfigPath(tb), "--cache-dir", cacheDir}, args...)
	cmd := exec.CommandContext(ctx, KubectlPath(tb), full...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}
