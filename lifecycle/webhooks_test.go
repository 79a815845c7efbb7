package lifecycle_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

func webhookOptions(t *testing.T) lifecycle.WebhookOptions {
	t.Helper()
	host, port, err := net.SplitHostPort(testenv.LoopbackAddr(t))
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	dir := t.TempDir()
	testenv.WriteServingCertificate(t, dir)
	return lifecycle.WebhookOptions{Host: host, Port: p, Cert: lifecycle.CertFiles{Path: dir}}
}

func hello(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") }

// A module registers a webhook with lifecycle.Webhook, or from an
// fx.Invoke on *lifecycle.Webhooks; both are served over TLS before the
// app's stores start, and the server stops with the app.
func TestWebhooksServeRegisteredHandlers(t *testing.T) {
	opts := webhookOptions(t)
	ta := newTestApp(t, lifecycle.Config{Webhook: opts},
		lifecycle.Webhook("/static", http.HandlerFunc(hello)),
		fx.Invoke(func(w *lifecycle.Webhooks) { w.Register("/invoked", http.HandlerFunc(hello)) }),
	)
	ta.app.RequireStart()
	// The client would speak HTTP/2 if the server offered it.
	client := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed test certificate
	defer client.CloseIdleConnections()
	base := "https://" + net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
	for _, path := range []string{"/static", "/invoked"} {
		resp, err := client.Get(base + path)
		require.NoError(t, err, path)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		assert.Equal(t, "hello", string(body), path)
		assert.Equal(t, 1, resp.ProtoMajor, "HTTP/2 is off unless enabled")
	}
	assert.Equal(t, http.StatusOK, probe(t, ta.probes, "/readyz"))
	ta.app.RequireStop()
	_, err := client.Get(base + "/static")
	assert.Error(t, err, "the server stopped with the app")
}

// An app that registers no webhook opens no webhook port.
func TestWebhooksOpenNoPortWithoutWebhooks(t *testing.T) {
	opts := webhookOptions(t)
	ta := newTestApp(t, lifecycle.Config{Webhook: opts})
	ta.app.RequireStart()
	defer ta.app.RequireStop()
	_, err := net.Dial("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	assert.Error(t, err, "nothing listens on the webhook port")
	assert.Equal(t, http.StatusOK, probe(t, ta.probes, "/readyz"), "the webhooks check passes with nothing to serve")
}

func TestWebhooksBadInput(t *testing.T) {
	t.Run("a path registered twice", func(t *testing.T) {
		err := fx.New(fx.NopLogger, fxstore.Module, lifecycle.Module,
			lifecycle.Webhook("/twice", http.HandlerFunc(hello)),
			lifecycle.Webhook("/twice", http.HandlerFunc(hello)),
		).Err()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "webhook path /twice registered twice")
	})
	t.Run("no certificate", func(t *testing.T) {
		opts := webhookOptions(t)
		opts.Cert.Path = t.TempDir()
		ta := newTestApp(t, lifecycle.Config{Webhook: opts}, lifecycle.Webhook("/hook", http.HandlerFunc(hello)))
		err := ta.app.Start(context.Background())
		require.Error(t, err)
		assert.Contains(t, err.Error(), `serve webhooks ["/hook"] on `+net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
		assert.Contains(t, err.Error(), "check --webhook-cert-path")
	})
	t.Run("registered after start", func(t *testing.T) {
		var hooks *lifecycle.Webhooks
		ta := newTestApp(t, lifecycle.Config{Webhook: webhookOptions(t)}, fx.Populate(&hooks))
		ta.app.RequireStart()
		defer ta.app.RequireStop()
		hooks.Register("/late", http.HandlerFunc(hello))
		assert.ErrorContains(t, hooks.Err(), "webhook /late registered after the app started")
		assert.Empty(t, hooks.Paths())
	})
}
