package lifecycle_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// get returns the status and body of a GET of url, or 0 and the error.
func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The probes are controller-runtime's healthz handlers: every check is
// listed by name, and served on its own.
func TestProbesListChecksByName(t *testing.T) {
	var warm atomic.Bool
	ta := newTestApp(t, lifecycle.Config{}, lifecycle.Checks(
		lifecycle.Check{Name: "cache", Readiness: true, Checker: func(*http.Request) error {
			if !warm.Load() {
				return errors.New("cold")
			}
			return nil
		}},
		lifecycle.Check{Name: "disk", Checker: healthz.Ping},
	))
	ta.app.RequireStart()
	defer ta.app.RequireStop()

	tests := []struct {
		give       string
		wantStatus int
		wantBody   []string
	}{
		{"/readyz?verbose", http.StatusInternalServerError, []string{"[-]cache failed: reason withheld\n[+]runnables ok\n[+]stores ok\n"}},
		{"/readyz/cache", http.StatusInternalServerError, []string{"internal server error: cold"}},
		{"/readyz/stores", http.StatusOK, []string{"ok"}},
		{"/readyz/runnables", http.StatusOK, []string{"ok"}},
		{"/readyz/nope", http.StatusNotFound, nil},
		{"/readyz?exclude=cache", http.StatusOK, []string{"ok"}},
		{"/healthz?verbose", http.StatusOK, []string{"[+]disk ok\n[+]ping ok\nhealthz check passed\n"}},
		{"/healthz/ping", http.StatusOK, []string{"ok"}},
		{"/healthz/cache", http.StatusNotFound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			status, body := get(t, http.DefaultClient, "http://"+ta.probes+tt.give)
			assert.Equal(t, tt.wantStatus, status, body)
			for _, want := range tt.wantBody {
				assert.Contains(t, body, want)
			}
		})
	}
	warm.Store(true)
	status, body := get(t, http.DefaultClient, "http://"+ta.probes+"/readyz")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body)
}

func TestCheckNamesAreUnique(t *testing.T) {
	ping := func(name string, readiness bool) lifecycle.Check {
		return lifecycle.Check{Name: name, Checker: healthz.Ping, Readiness: readiness}
	}
	tests := []struct {
		name      string
		give      []lifecycle.Check
		wantError string
	}{
		{name: "twice on /readyz", give: []lifecycle.Check{ping("cache", true), ping("cache", true)},
			wantError: `/readyz has two checks named "cache"; give each check its own name`},
		{name: "the app's own", give: []lifecycle.Check{ping("stores", true)},
			wantError: `/readyz has two checks named "stores"`},
		{name: "the ping of /healthz", give: []lifecycle.Check{ping("ping", false)},
			wantError: `/healthz has two checks named "ping"`},
		{name: "no name", give: []lifecycle.Check{ping("", false)},
			wantError: "a /healthz check has no name"},
		{name: "one name on each endpoint", give: []lifecycle.Check{ping("cache", true), ping("cache", false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ta := newTestApp(t, lifecycle.Config{}, lifecycle.Checks(tt.give...))
			err := ta.app.Start(t.Context())
			if tt.wantError == "" {
				require.NoError(t, err)
				ta.app.RequireStop()
				return
			}
			require.ErrorContains(t, err, tt.wantError)
			assert.Equal(t, 0, probe(t, ta.probes, "/healthz"), "nothing serves")
		})
	}
}

// pprof serves on its own address when one is given, as controller-runtime's
// manager serves it, and nowhere otherwise.
func TestPprof(t *testing.T) {
	tests := []struct {
		name string
		give string
		want bool
	}{
		{name: "on", give: testenv.LoopbackAddr(t), want: true},
		{name: "off by default", give: ""},
		{name: "off", give: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ta := newTestApp(t, lifecycle.Config{PprofBindAddress: tt.give})
			ta.app.RequireStart()
			serving := ta.logs.FilterMessage("serving").FilterField(zap.String("server", "pprof")).Len()
			assert.Equal(t, http.StatusNotFound, probe(t, ta.probes, "/debug/pprof/"), "not on the probes' address")
			if !tt.want {
				assert.Zero(t, serving, "no pprof server")
				ta.app.RequireStop()
				return
			}
			assert.Equal(t, 1, serving)
			status, body := get(t, http.DefaultClient, "http://"+tt.give+"/debug/pprof/")
			assert.Equal(t, http.StatusOK, status)
			assert.Contains(t, body, "goroutine")
			assert.Equal(t, http.StatusOK, probe(t, tt.give, "/debug/pprof/cmdline"))
			ta.app.RequireStop()
			assert.Equal(t, 0, probe(t, tt.give, "/debug/pprof/"), "closed on stop")
		})
	}
}

var configMaps = fx.Invoke(func(r *fxstore.Registry) error {
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	return err
})

func TestPlainMetrics(t *testing.T) {
	addr := testenv.LoopbackAddr(t)
	ta := newTestApp(t, lifecycle.Config{MetricsBindAddress: addr}, configMaps)
	ta.app.RequireStart()
	status, body := get(t, http.DefaultClient, "http://"+addr+"/metrics")
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `fxkube_store_synced{`)
	ta.app.RequireStop()
	assert.Equal(t, 0, probe(t, addr, "/metrics"), "closed on stop")
}

// nowhere is an API server that is not there: the tests that use it make
// no request that reaches it.
var nowhere = fx.Supply(&rest.Config{Host: "http://127.0.0.1:1"})

// tlsClient trusts any certificate, as a scraper of a self-signed endpoint
// must, and offers HTTP/2.
func tlsClient(t *testing.T) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Secure metrics are HTTPS, HTTP/1.1 unless HTTP/2 is enabled, and refuse
// requests without a token (test/metrics_test.go shows the rest against a
// real API server).
func TestSecureMetrics(t *testing.T) {
	certDir := t.TempDir()
	crt, key, err := certutil.GenerateSelfSignedCertKey("metrics.example", nil, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(certDir, "metrics.crt"), crt, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(certDir, "metrics.key"), key, 0o600))

	tests := []struct {
		name      string
		give      lifecycle.Config
		wantProto string
		wantDNS   string // of the certificate served
	}{
		{name: "self-signed", give: lifecycle.Config{}, wantProto: "HTTP/1.1", wantDNS: "localhost"},
		{name: "HTTP/2", give: lifecycle.Config{EnableHTTP2: true}, wantProto: "HTTP/2.0", wantDNS: "localhost"},
		{name: "certificate files", give: lifecycle.Config{MetricsCert: lifecycle.CertFiles{Path: certDir, Name: "metrics.crt", Key: "metrics.key"}},
			wantProto: "HTTP/1.1", wantDNS: "metrics.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := testenv.LoopbackAddr(t)
			cfg := tt.give
			cfg.MetricsBindAddress, cfg.MetricsSecure = addr, true
			ta := newTestApp(t, cfg, nowhere)
			ta.app.RequireStart()
			defer ta.app.RequireStop()

			resp, err := tlsClient(t).Get("https://" + addr + "/metrics")
			require.NoError(t, err)
			defer resp.Body.Close()
			denied, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no token: %s", denied)
			assert.Equal(t, tt.wantProto, resp.Proto)
			require.NotNil(t, resp.TLS)
			assert.Contains(t, resp.TLS.PeerCertificates[0].DNSNames, tt.wantDNS)
			status, body := get(t, http.DefaultClient, "http://"+addr+"/metrics")
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Contains(t, body, "Client sent an HTTP request to an HTTPS server", "no plain HTTP")
		})
	}
}

func TestSecureMetricsFailStart(t *testing.T) {
	addr := testenv.LoopbackAddr(t)
	tests := []struct {
		name      string
		give      lifecycle.Config
		opts      []fx.Option
		wantError string
	}{
		{name: "no API server", give: lifecycle.Config{MetricsSecure: true, MetricsBindAddress: addr},
			wantError: fmt.Sprintf("serve metrics on %s: secure metrics ask the API server to authenticate and authorize each request: no *rest.Config", addr)},
		{name: "no certificate files", give: lifecycle.Config{MetricsSecure: true, MetricsBindAddress: addr, MetricsCert: lifecycle.CertFiles{Path: t.TempDir()}},
			opts: []fx.Option{nowhere}, wantError: "tls.crt: no such file or directory; check --metrics-cert-path, --metrics-cert-name and --metrics-cert-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ta := newTestApp(t, tt.give, tt.opts...)
			require.ErrorContains(t, ta.app.Start(t.Context()), tt.wantError)
			assert.Equal(t, 0, probe(t, ta.probes, "/healthz"), "a failed start closes the servers")
		})
	}
}

// A port that is taken fails start at once, naming the server and the
// address.
func TestTakenPortFailsStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	taken := ln.Addr().String()
	tests := []struct {
		name      string
		give      lifecycle.Config
		opts      []fx.Option
		wantError string
	}{
		{name: "probes", give: lifecycle.Config{HealthProbeBindAddress: taken}, wantError: "serve health probes on " + taken},
		{name: "pprof", give: lifecycle.Config{PprofBindAddress: taken}, wantError: "serve pprof on " + taken},
		{name: "metrics", give: lifecycle.Config{MetricsBindAddress: taken}, wantError: "serve metrics on " + taken},
		{name: "secure metrics", give: lifecycle.Config{MetricsBindAddress: taken, MetricsSecure: true}, opts: []fx.Option{nowhere},
			wantError: "serve metrics on " + taken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ta := newTestApp(t, tt.give, tt.opts...)
			err := ta.app.Start(t.Context())
			require.ErrorContains(t, err, tt.wantError)
			assert.ErrorContains(t, err, "address already in use")
		})
	}
}

// noter is a runnable with a readiness note.
type noter struct{ note atomic.Pointer[string] }

func (n *noter) Start(ctx context.Context) error { <-ctx.Done(); return nil }
func (n *noter) ReadinessNote() string           { return *n.note.Load() }

// A runnable's readiness note is a line of /readyz?verbose that passes.
func TestReadyzTellsRunnablesNotes(t *testing.T) {
	n := &noter{}
	n.note.Store(new(`controller "widgets" is waiting`))
	ta := newTestApp(t, lifecycle.Config{}, lifecycle.Runnables(n))
	ta.app.RequireStart()
	defer ta.app.RequireStop()
	require.Eventually(t, func() bool {
		s, _ := get(t, http.DefaultClient, "http://"+ta.probes+"/readyz")
		return s == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)

	status, body := get(t, http.DefaultClient, "http://"+ta.probes+"/readyz?verbose")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "[+]runnables ok\n[+]stores ok\n[+]webhooks ok\n[+]info: controller \"widgets\" is waiting\nhealthz check passed\n", body)
	_, body = get(t, http.DefaultClient, "http://"+ta.probes+"/readyz")
	assert.Equal(t, "ok", body, "only verbose answers tell notes")
	n.note.Store(new(""))
	_, body = get(t, http.DefaultClient, "http://"+ta.probes+"/readyz?verbose")
	assert.NotContains(t, body, "info:")
}
