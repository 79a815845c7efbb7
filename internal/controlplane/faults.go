package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The methods in this file inject faults into a running control plane, for
// reliability tests. A test binary that uses them should have a control plane
// of its own, as every test sharing it sees the faults.

// StopAPIServer stops kube-apiserver gracefully, keeping etcd and its data:
// until StartAPIServer, clients meet "connection refused".
func (r *Running) StopAPIServer() error {
	if err := r.env.ControlPlane.APIServer.Stop(); err != nil {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	return nil
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the same
// address, with the same certificates and etcd, so that every client config
// made before keeps working. It returns once kube-apiserver is healthy.
func (r *Running) StartAPIServer() error {
	if err := r.env.ControlPlane.APIServer.Start(); err != nil {
		return fmt.Errorf("start kube-apiserver again: %w", err)
	}
	return nil
}

// configureAPIServer sets the flags every kube-apiserver of ours runs with.
func (o options) configureAPIServer(s *envtest.APIServer) {
	// Without a grace period for watches, kube-apiserver stops only once
	// every client has closed its watches, or after a minute: a client whose
	// informers keep watching holds it up. A real kube-apiserver that stops
	// ends its watches, and the clients must cope; so must ours.
	s.Configure().Set("shutdown-watch-termination-grace-period", "1s")
	if gates := o.featureGatesFlag(); gates != "" {
		s.Configure().Set("feature-gates", gates)
	}
}

// Replica is another kube-apiserver on the control plane's etcd, as in a
// highly available control plane; StartReplica starts one.
type Replica struct {
	// Config is an admin (system:masters) client config for the replica.
	Config *rest.Config

	server  *envtest.APIServer
	certDir string
}

// StartReplica starts another kube-apiserver, on a port of its own, that
// stores in the control plane's etcd: what is written through either, the
// other serves, and it keeps serving while StopAPIServer has stopped the
// main one. It runs with the main one's feature gates (see
// [WithFeatureGates]). flags, as "name=value", are passed to it on top of
// envtest's defaults and replace those of ours they name, such as
// "watch-cache=false" to have it serve every watch from etcd. Close it when
// done.
func (r *Running) StartReplica(flags ...string) (_ *Replica, err error) {
	main := r.env.ControlPlane.APIServer
	ports, err := loopbackPorts(1)
	if err != nil {
		return nil, err
	}
	certDir, err := os.MkdirTemp("", "fxkube-apiserver-replica-")
	if err != nil {
		return nil, fmt.Errorf("make the replica's certificate directory: %w", err)
	}
	rep := &Replica{certDir: certDir, server: &envtest.APIServer{
		Path:         main.Path,
		CertDir:      certDir,
		EtcdURL:      r.env.ControlPlane.Etcd.URL,
		StartTimeout: main.StartTimeout,
		StopTimeout:  main.StopTimeout,
		Out:          main.Out,
		Err:          main.Err,
	}}
	defer func() {
		if err != nil {
			err = errors.Join(err, rep.Close())
		}
	}()
	rep.server.SecureServing.Address = "127.0.0.1"
	rep.server.SecureServing.Port = ports[0]
	r.opts.configureAPIServer(rep.server)
	for _, f := range flags {
		name, value, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("replica flag %q: want name=value", f)
		}
		rep.server.Configure().Set(name, value)
	}
	if err := rep.Start(); err != nil {
		return nil, err
	}
	plane := &envtest.ControlPlane{APIServer: rep.server}
	admin, err := plane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}},
		&rest.Config{QPS: r.Config.QPS, Burst: r.Config.Burst})
	if err != nil {
		return nil, fmt.Errorf("add the replica's admin: %w", err)
	}
	rep.Config = admin.Config()
	return rep, nil
}

// Stop stops the replica gracefully; Start starts it again.
func (r *Replica) Stop() error {
	if err := r.server.Stop(); err != nil {
		return fmt.Errorf("stop the kube-apiserver replica: %w", err)
	}
	return nil
}

// Start starts the replica again after Stop, on the same address and with
// the same certificates, and returns once it is healthy.
func (r *Replica) Start() error {
	if err := r.server.Start(); err != nil {
		return fmt.Errorf("start the kube-apiserver replica: %w", err)
	}
	return nil
}

// Close stops the replica and removes its certificates.
func (r *Replica) Close() error {
	return errors.Join(r.Stop(), os.RemoveAll(r.certDir))
}

// CompactEtcd compacts etcd's history up to its current revision and returns
// that revision. A watch from an earlier resource version that etcd, rather
// than kube-apiserver's watch cache, has to serve then fails with "too old
// resource version" (410 Gone), and the client must list again; restarting
// kube-apiserver empties its watch cache, so that every watch resumed after a
// restart is such a watch.
//
// It uses etcd's JSON gateway, so that the test binary needs no etcd client.
func (r *Running) CompactEtcd(ctx context.Context) (int64, error) {
	var status struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// Any read returns the current revision in its header.
	if err := r.etcd(ctx, "/v3/kv/range", map[string]any{"key": []byte{0}, "count_only": true}, &status); err != nil {
		return 0, fmt.Errorf("read etcd's revision: %w", err)
	}
	rev, err := strconv.ParseInt(status.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read etcd's revision: %q: %w", status.Header.Revision, err)
	}
	if err := r.etcd(ctx, "/v3/kv/compaction", map[string]any{"revision": rev, "physical": true}, nil); err != nil {
		return 0, fmt.Errorf("compact etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}

// etcd posts req, as JSON, to path of etcd's gRPC gateway and decodes the
// answer into resp, unless resp is nil.
func (r *Running) etcd(ctx context.Context, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	u := r.env.ControlPlane.Etcd.URL.JoinPath(path)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	// No idle connection, and so no goroutine, outlives the call.
	hreq.Close = true
	hresp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return err
	}
	defer hresp.Body.Close()
	raw, err := io.ReadAll(hresp.Body)
	if err != nil {
		return err
	}
	if hresp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", hresp.Status, bytes.TrimSpace(raw))
	}
	if resp == nil {
		return nil
	}
	return json.Unmarshal(raw, resp)
}
