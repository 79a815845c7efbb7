package controlplane

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// defaultTimeout bounds the start and the stop of each process unless the
// KUBEBUILDER_CONTROLPLANE_*_TIMEOUT variables say otherwise.
const defaultTimeout = time.Minute

// Running is a kube-apiserver and etcd started by Start.
type Running struct {
	// Config is the admin (system:masters) client config.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file's content for Config.
	Kubeconfig []byte

	env *envtest.Environment
	// certDir holds kube-apiserver's certificates. It is ours, not envtest's,
	// so that they outlive a restart of kube-apiserver (see StopAPIServer).
	certDir string
	// opts are Start's options, for replicas to run as the main
	// kube-apiserver does.
	opts options
	// usersMu serialises AddUser: envtest signs user certificates with an
	// unguarded serial-number counter.
	usersMu sync.Mutex
}

// startAttempts is how many times Start tries, each on fresh ports.
const startAttempts = 3

// Start starts etcd and kube-apiserver from the binaries in dir, listening on
// 127.0.0.1 only, through controller-runtime's envtest.
//
// The ports are picked free, then released for the processes to bind.
// Meanwhile another process may take one: a client's connection gets its
// local port from the same range. envtest retries on the same ports, so
// Start tries again on fresh ones, up to startAttempts times.
func Start(dir string, opts ...Option) (*Running, error) {
	if err := Check(dir); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	var errs []error
	for range startAttempts {
		r, err := start(dir, o)
		if err == nil {
			return r, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// start makes one attempt of Start, on ports it picks.
func start(dir string, o options) (_ *Running, err error) {
	// envtest lets the resolver pick the address for "localhost"; pin every
	// listener to IPv4 loopback instead, so that nothing is reachable from
	// outside the machine whatever the resolver says.
	ports, err := loopbackPorts(3)
	if err != nil {
		return nil, err
	}
	etcd := &envtest.Etcd{
		Path: filepath.Join(dir, Etcd),
		URL:  &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", ports[0])},
	}
	etcd.Configure().Set("listen-peer-urls", "http://"+net.JoinHostPort("127.0.0.1", ports[1]))
	te := &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			Etcd:        etcd,
			KubectlPath: filepath.Join(dir, Kubectl),
		},
		// Never a cluster named by USE_EXISTING_CLUSTER: callers own
		// their control plane and may do anything to it.
		UseExistingCluster: new(bool),
	}
	apiServer := te.ControlPlane.GetAPIServer()
	apiServer.Path = filepath.Join(dir, APIServer)
	apiServer.SecureServing.Address = "127.0.0.1"
	apiServer.SecureServing.Port = ports[2]
	// envtest deletes a certificate directory it made itself when
	// kube-apiserver stops, and makes new certificates when it starts, which
	// every client config made until then would reject.
	certDir, err := os.MkdirTemp("", "fxkube-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("make kube-apiserver's certificate directory: %w", err)
	}
	apiServer.CertDir = certDir
	o.configureAPIServer(apiServer)
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		te.ControlPlaneStartTimeout = defaultTimeout
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT") == "" {
		te.ControlPlaneStopTimeout = defaultTimeout
	}
	r := &Running{env: te, certDir: certDir, opts: o}
	if r.Config, err = te.Start(); err != nil {
		what := "kube-apiserver"
		if gates := o.featureGatesFlag(); gates != "" {
			what += " --feature-gates=" + gates
		}
		return nil, errors.Join(fmt.Errorf("start %s and etcd from %s: %w; "+
			"KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true shows their output", what, dir, err), r.Stop())
	}
	r.Kubeconfig = te.KubeConfig
	return r, nil
}

// AddUser returns a client config for a new user of the control plane,
// authenticated by a client certificate, with the given name and groups.
func (r *Running) AddUser(name string, groups ...string) (*rest.Config, error) {
	r.usersMu.Lock()
	defer r.usersMu.Unlock()
	u, err := r.env.AddUser(envtest.User{Name: name, Groups: groups}, r.Config)
	if err != nil {
		return nil, fmt.Errorf("add user %q: %w", name, err)
	}
	return u.Config(), nil
}

// Stop stops kube-apiserver and etcd and removes their data.
func (r *Running) Stop() error {
	return errors.Join(r.env.Stop(), os.RemoveAll(r.certDir))
}

// LoopbackAddr returns a 127.0.0.1 address whose port was free, for a test
// server.
func LoopbackAddr() (string, error) {
	ports, err := loopbackPorts(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", ports[0]), nil
}

// loopbackPorts returns n distinct ports that were free on 127.0.0.1. They
// are held open together so that the kernel hands out distinct ones.
func loopbackPorts(n int) ([]string, error) {
	ports := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
		}
		defer l.Close()
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return ports, nil
}
