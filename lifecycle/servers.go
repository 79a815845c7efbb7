package lifecycle

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fxkube/fxkube/internal/contract"
)

// servers are the app's probe, pprof and metrics servers: controller-runtime's
// runnables (manager.Server, as its manager serves probes and pprof, and
// metricsserver.Server), run until close.
type servers struct {
	log    *zap.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// shutdown stops the app when a server fails once serve has returned.
	shutdown func(cause error)
}

// serve starts the probe, pprof and metrics servers. Each listens before
// serve returns, so a taken port fails start at once, naming the address.
func (r *runner) serve(ctx context.Context) (_ *servers, err error) {
	probes, err := probeHandler(append(r.readiness(), r.checks...), r.readinessNotes, r.nonGating...)
	if err != nil {
		return nil, err
	}
	s := &servers{log: r.log, shutdown: r.shutdown}
	// The servers log through controller-runtime's logr, found in ctx.
	s.ctx, s.cancel = context.WithCancel(logr.NewContext(context.Background(), zapr.NewLogger(r.log)))
	defer func() {
		if err != nil {
			s.close(context.Background())
		}
	}()
	if addr := r.cfg.HealthProbeBindAddress; addr != "0" {
		if err := s.listen("health probes", addr, probes); err != nil {
			return nil, err
		}
	}
	if addr := r.cfg.PprofBindAddress; addr != "" && addr != "0" {
		if err := s.listen("pprof", addr, pprofHandler()); err != nil {
			return nil, err
		}
	}
	if addr := r.cfg.MetricsBindAddress; addr != "0" {
		if err := s.serveMetrics(ctx, r, addr); err != nil {
			return nil, fmt.Errorf("serve metrics on %s: %w", addr, err)
		}
	}
	return s, nil
}

// listen serves handler on addr, as controller-runtime's manager serves its
// probes and pprof: the listener is made first, so that a taken port is an
// error now.
func (s *servers) listen(name, addr string, handler http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve %s on %s: %w", name, addr, err)
	}
	s.run(name, &manager.Server{
		Name: name,
		Server: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 10 * time.Second,
			// Requests end with the servers (a 30-second CPU profile too),
			// so that stop need not wait for them.
			BaseContext: func(net.Listener) context.Context { return s.ctx },
		},
		Listener: ln,
	})
	s.log.Info("serving", zap.String("server", name), zap.Stringer("address", ln.Addr()))
	return nil
}

// serveMetrics serves /metrics with controller-runtime's metrics server, as
// kubebuilder's cmd/main.go configures it. That server listens only once it
// runs, so serveMetrics waits until it has, or has failed to.
func (s *servers) serveMetrics(ctx context.Context, r *runner, addr string) error {
	cfg := r.cfg
	opts := metricsserver.Options{BindAddress: addr, SecureServing: cfg.MetricsSecure}
	srv, err := func() (metricsserver.Server, error) {
		if !cfg.MetricsSecure {
			return metricsserver.NewServer(opts, nil, nil)
		}
		conn, err := r.connect()
		if err != nil {
			return nil, fmt.Errorf("secure metrics ask the API server to authenticate and authorize each request: %w", err)
		}
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		if opts.TLSOpts, err = cfg.serverTLS(); err != nil {
			return nil, err
		}
		if cert := cfg.MetricsCert; cert.Path != "" {
			// As kubebuilder's scaffold does: a certificate that cannot be
			// read is an error, not a silent fallback to a self-signed one
			// (controller-runtime's, when its files are missing).
			w, err := certwatcher.New(filepath.Join(cert.Path, cert.Name), filepath.Join(cert.Path, cert.Key))
			if err != nil {
				return nil, fmt.Errorf("%w; check --metrics-cert-path, --metrics-cert-name and --metrics-cert-key", err)
			}
			opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.GetCertificate = w.GetCertificate })
			s.run("metrics certificate watcher", w)
		}
		return metricsserver.NewServer(opts, conn.Config, conn.HTTPClient)
	}()
	if err != nil {
		return err
	}
	bound, ok := srv.(interface{ GetBindAddr() string })
	if !ok {
		// Not controller-runtime's server as we know it: a port it
		// cannot bind stops the app once it has started.
		s.run("metrics", srv)
		return nil
	}
	if err := s.startAndWait(ctx, "metrics", srv, func() bool { return bound.GetBindAddr() != "" }); err != nil {
		return err
	}
	s.log.Info("serving", zap.String("server", "metrics"), zap.String("address", bound.GetBindAddr()), zap.Bool("secure", cfg.MetricsSecure))
	return nil
}

// serveWebhooks serves w's webhooks, if any is registered, and waits until
// the server answers TLS handshakes: the API server may call it as soon as
// stores list.
func (s *servers) serveWebhooks(ctx context.Context, w *Webhooks) error {
	paths := w.seal()
	if len(paths) == 0 {
		return nil
	}
	started := w.server.StartedChecker()
	if err := s.startAndWait(ctx, "webhooks", w.server, func() bool { return started(nil) == nil }); err != nil {
		return fmt.Errorf("serve webhooks %q on %s: %w; check --webhook-cert-path (with --webhook-cert-name and --webhook-cert-key) and --webhook-port", paths, w.addr, err)
	}
	s.log.Info("serving", zap.String("server", "webhooks"), zap.String("address", w.addr), zap.Strings("paths", paths))
	return nil
}

// startAndWait runs rn until close, as start does, and waits until ready
// reports that it serves, or it fails, or ctx ends: servers that listen
// only once they run.
func (s *servers) startAndWait(ctx context.Context, name string, rn manager.Runnable, ready func() bool) error {
	failed, done := s.start(name, rn)
	defer done()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-failed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if ready() {
				return nil
			}
		}
	}
}

// run runs rn until close. An error it stops with stops the app.
func (s *servers) run(name string, rn manager.Runnable) {
	_, ready := s.start(name, rn)
	ready()
}

// start runs rn until close. Until ready is called, the error rn stops
// with, if any, goes to failed (serve waits there for a server to listen);
// from then on, it stops the app.
func (s *servers) start(name string, rn manager.Runnable) (failed <-chan error, ready func()) {
	ch := make(chan error, 1)
	var (
		mu      sync.Mutex
		waiting = true
	)
	stopApp := func(err error) {
		s.log.Error("server failed; stopping the app", zap.String("server", name), zap.Error(err))
		s.shutdown(fmt.Errorf("server %s: %w", name, err))
	}
	s.wg.Go(func() {
		err := rn.Start(s.ctx)
		if err == nil || s.ctx.Err() != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if waiting {
			ch <- err
			return
		}
		stopApp(err)
	})
	return ch, func() {
		mu.Lock()
		defer mu.Unlock()
		waiting = false
		select {
		case err := <-ch: // failed after serve stopped waiting
			stopApp(err)
		default:
		}
	}
}

// probeHandler serves /healthz and /readyz with controller-runtime's
// healthz.Handler, as its manager does: each lists its checks by name with
// ?verbose, runs one at /readyz/<name>, and answers 500 when a check fails
// (Kubernetes probes take any status from 400 on as a failure). /healthz
// always has the check "ping". /readyz?verbose adds the lines notes
// returns, which do not fail it (see contract.ReadinessNoter), and lists
// the nonGating checks (see readyzHandler).
func probeHandler(checks []Check, notes func() []string, nonGating ...contract.NonGatingChecks) (http.Handler, error) {
	endpoints := map[string]*healthz.Handler{
		"/healthz": {Checks: map[string]healthz.Checker{"ping": healthz.Ping}},
		"/readyz":  {Checks: map[string]healthz.Checker{}},
	}
	for _, c := range checks {
		path := "/healthz"
		if c.Readiness {
			path = "/readyz"
		}
		h := endpoints[path]
		switch _, taken := h.Checks[c.Name]; {
		case c.Name == "":
			return nil, fmt.Errorf("a %s check has no name; name each check", path)
		case taken:
			return nil, fmt.Errorf("%s has two checks named %q; give each check its own name", path, c.Name)
		}
		h.Checks[c.Name] = c.Checker
	}
	readyz := &readyzHandler{gating: endpoints["/readyz"]}
	for _, c := range nonGating {
		if c != nil {
			readyz.nonGating = append(readyz.nonGating, c)
		}
	}
	handlers := map[string]http.Handler{"/healthz": endpoints["/healthz"], "/readyz": readyz}
	mux := http.NewServeMux()
	for path, h := range handlers {
		if path == "/readyz" && notes != nil {
			h = withNotes(h, notes)
		}
		mux.Handle(path, http.StripPrefix(path, h))
		mux.Handle(path+"/", http.StripPrefix(path, h))
	}
	return mux, nil
}

// withNotes adds the lines notes returns to h's verbose answers, before
// the last line, each as "[+]info: <note>": a line that passes.
func withNotes(h http.Handler, notes func() []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		lines := notes()
		if len(lines) == 0 || strings.Trim(req.URL.Path, "/") != "" {
			h.ServeHTTP(w, req)
			return
		}
		rec := &bufferedResponse{header: w.Header(), status: http.StatusOK}
		h.ServeHTTP(rec, req)
		body := rec.body.String()
		if i := strings.LastIndex(strings.TrimSuffix(body, "\n"), "\n"); i >= 0 {
			var b strings.Builder
			for _, l := range lines {
				b.WriteString("[+]info: " + l + "\n")
			}
			body = body[:i+1] + b.String() + body[i+1:]
		}
		w.WriteHeader(rec.status)
		_, _ = io.WriteString(w, body)
	})
}

// bufferedResponse holds an answer to rewrite it.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(status int)      { b.status = status }

// pprofHandler serves net/http/pprof's endpoints, as controller-runtime's
// manager does on its PprofBindAddress.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// close stops the servers and waits for them, or for ctx to end.
func (s *servers) close(ctx context.Context) {
	if s == nil {
		return
	}
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn("servers did not close in time", zap.Error(ctx.Err()))
	}
}

// serveRunnable runs a server that a module added as a runnable, until
// close, as the app's own. A webhook server is waited for until it
// answers TLS handshakes, as the app's is.
func (s *servers) serveRunnable(ctx context.Context, rn manager.Runnable) error {
	name := describe(rn).String()
	w, ok := rn.(webhook.Server)
	if !ok {
		s.run(name, rn)
		return nil
	}
	started := w.StartedChecker()
	if err := s.startAndWait(ctx, name, rn, func() bool { return started(nil) == nil }); err != nil {
		return fmt.Errorf("serve %s: %w", name, err)
	}
	return nil
}
