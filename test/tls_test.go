package test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/checksum"
	"github.com/fxkube/fxkube/modules/mirror"
	"github.com/fxkube/fxkube/modules/rollout"
)

// helloWebhook gives the example app a webhook, so that it serves its
// webhook server.
var helloWebhook = fx.Module("hello", lifecycle.Webhook("/hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, "hello")
})))

// exampleApp is the command of cmd/app, with helloWebhook.
func exampleApp() *cobra.Command {
	return app.Command("fxkube", rollout.Module, mirror.Module, checksum.Module, helloWebhook)
}

// runUntilReady runs cmd with args until its /readyz at probes passes,
// and stops it, checking it stops cleanly, when the test ends.
func runUntilReady(t *testing.T, cmd *cobra.Command, probes string, args ...string) {
	t.Helper()
	cmd.SetArgs(args)
	ctx, cancel := context.WithCancel(t.Context())
	exited := make(chan error, 1)
	go func() { exited <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-exited:
			assert.NoError(t, err, "the app stops cleanly")
		case <-time.After(time.Minute):
			t.Error("the app did not stop")
		}
	})
	require.Eventually(t, func() bool { return len(exited) > 0 || testenv.Status(probes, "/readyz") == http.StatusOK },
		time.Minute, 50*time.Millisecond, "the app becomes ready")
	require.Empty(t, exited, "the app exited")
}

// The example app run with --tls-min-version VersionTLS13, secure metrics
// and a webhook refuses TLS 1.2 handshakes and serves TLS 1.3 ones, on
// both servers.
func TestExampleAppTLSMinVersion(t *testing.T) {
	metrics, probes, webhooks := testenv.LoopbackAddr(t), testenv.LoopbackAddr(t), testenv.LoopbackAddr(t)
	_, webhookPort, err := net.SplitHostPort(webhooks)
	require.NoError(t, err)
	certs := t.TempDir()
	testenv.WriteServingCertificate(t, certs)
	runUntilReady(t, exampleApp(), probes, "run", "--kubeconfig", testenv.KubeconfigPath(t), "--log-level", "warn",
		"--metrics-bind-address", metrics, "--metrics-secure", "--health-probe-bind-address", probes,
		"--webhook-port", webhookPort, "--webhook-cert-path", certs, "--shard-namespace", "default",
		"--tls-min-version", "VersionTLS13")

	for server, addr := range map[string]string{"metrics": metrics, "webhooks": webhooks} {
		t.Run(server, func(t *testing.T) {
			old, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}) //nolint:gosec // self-signed test certificates
			if err == nil {
				_ = old.Close()
			}
			require.Error(t, err, "a TLS 1.2 handshake is refused")
			assert.ErrorContains(t, err, "protocol version not supported")
			conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) //nolint:gosec // self-signed test certificates
			require.NoError(t, err, "a TLS 1.3 handshake is served")
			defer conn.Close()
			assert.Equal(t, uint16(tls.VersionTLS13), conn.ConnectionState().Version)
		})
	}
}

// --tls-cipher-suites with a name no Kubernetes component knows fails
// the start, naming the flag and the valid names, before anything serves.
func TestExampleAppUnknownCipherSuite(t *testing.T) {
	probes := testenv.LoopbackAddr(t)
	cmd := exampleApp()
	cmd.SetArgs([]string{"run", "--kubeconfig", testenv.KubeconfigPath(t), "--health-probe-bind-address", probes,
		"--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_RSA_WITH_ROT13"})
	err := cmd.Execute()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `build the app: --tls-cipher-suites: unknown cipher suites ["TLS_RSA_WITH_ROT13"]; use names of crypto/tls: `)
	for _, valid := range []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "(insecure: ", "TLS_RSA_WITH_AES_128_CBC_SHA"} {
		assert.Contains(t, err.Error(), valid)
	}
	assert.Zero(t, testenv.Status(probes, "/healthz"), "nothing served")
}
