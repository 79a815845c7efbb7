package lifecycle_test

import (
	"crypto/tls"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	certutil "k8s.io/client-go/util/cert"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// handshake completes a TLS handshake with addr as client configures it,
// trusting any certificate, and returns the connection's state.
func handshake(t *testing.T, addr string, client *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	client.InsecureSkipVerify = true //nolint:gosec // self-signed test certificates
	conn, err := tls.Dial("tcp", addr, client)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer conn.Close()
	return conn.ConnectionState(), nil
}

// tlsServer is an app's TLS server under test: its address once cfg's
// app runs.
type tlsServer struct {
	name  string
	serve func(t *testing.T, cfg lifecycle.Config) (addr string)
}

// tlsServers are the app's two TLS servers: the webhook server (with an
// ECDSA certificate) and secure metrics (self-signed).
var tlsServers = []tlsServer{
	{"webhooks", func(t *testing.T, cfg lifecycle.Config) string {
		cfg.Webhook = webhookOptions(t)
		ta := newTestApp(t, cfg, lifecycle.Webhook("/hook", http.HandlerFunc(hello)))
		ta.app.RequireStart()
		t.Cleanup(ta.app.RequireStop)
		return net.JoinHostPort(cfg.Webhook.Host, strconv.Itoa(cfg.Webhook.Port))
	}},
	{"secure metrics", func(t *testing.T, cfg lifecycle.Config) string {
		cfg.MetricsBindAddress, cfg.MetricsSecure = testenv.LoopbackAddr(t), true
		ta := newTestApp(t, cfg, nowhere)
		ta.app.RequireStart()
		t.Cleanup(ta.app.RequireStop)
		return cfg.MetricsBindAddress
	}},
}

// --tls-min-version VersionTLS13 refuses a TLS 1.2 handshake and serves a
// TLS 1.3 one, on both servers; without it, TLS 1.2 is served.
func TestTLSMinVersion(t *testing.T) {
	for _, srv := range tlsServers {
		t.Run(srv.name, func(t *testing.T) {
			addr := srv.serve(t, lifecycle.Config{TLS: lifecycle.TLSOptions{MinVersion: "VersionTLS13"}})
			_, err := handshake(t, addr, &tls.Config{MaxVersion: tls.VersionTLS12})
			require.Error(t, err, "a TLS 1.2 handshake is refused")
			assert.ErrorContains(t, err, "protocol version not supported")
			state, err := handshake(t, addr, &tls.Config{MinVersion: tls.VersionTLS13})
			require.NoError(t, err, "a TLS 1.3 handshake is served")
			assert.Equal(t, uint16(tls.VersionTLS13), state.Version)

			addr = srv.serve(t, lifecycle.Config{})
			state, err = handshake(t, addr, &tls.Config{MaxVersion: tls.VersionTLS12})
			require.NoError(t, err, "by default, TLS 1.2 is served")
			assert.Equal(t, uint16(tls.VersionTLS12), state.Version)
		})
	}
}

// --tls-cipher-suites limits the TLS 1.2 cipher suites both servers
// agree to.
func TestTLSCipherSuites(t *testing.T) {
	tests := []struct {
		server string
		give   uint16 // the one suite served
		other  uint16 // one Go serves by default for the same key
	}{
		{"webhooks", tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		{"secure metrics", tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256},
	}
	for _, tt := range tests {
		t.Run(tt.server, func(t *testing.T) {
			i := slices.IndexFunc(tlsServers, func(s tlsServer) bool { return s.name == tt.server })
			cfg := lifecycle.Config{TLS: lifecycle.TLSOptions{CipherSuites: []string{tls.CipherSuiteName(tt.give)}}}
			addr := tlsServers[i].serve(t, cfg)
			_, err := handshake(t, addr, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tt.other}})
			require.Error(t, err, "%s is not offered", tls.CipherSuiteName(tt.other))
			state, err := handshake(t, addr, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tt.other, tt.give}})
			require.NoError(t, err)
			assert.Equal(t, tls.CipherSuiteName(tt.give), tls.CipherSuiteName(state.CipherSuite))
		})
	}
}

// A name component-base does not know fails fx.New, naming the flag and
// the names it takes, whether the Config comes through lifecycle.Options
// or from the graph.
func TestTLSUnknownNamesFailTheBuild(t *testing.T) {
	tests := []struct {
		name string
		give lifecycle.TLSOptions
		want []string
	}{
		{
			name: "version",
			give: lifecycle.TLSOptions{MinVersion: "VersionTLS14"},
			want: []string{`--tls-min-version: unknown TLS version "VersionTLS14"; use one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13`},
		},
		{
			name: "cipher suites",
			give: lifecycle.TLSOptions{CipherSuites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "NOPE", "TLS_FAST"}},
			want: []string{
				`--tls-cipher-suites: unknown cipher suites ["NOPE" "TLS_FAST"]; use names of crypto/tls: `,
				"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, ",
				"(insecure: ",
				"TLS_RSA_WITH_AES_128_CBC_SHA",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := lifecycle.Config{TLS: tt.give}
			for how, app := range map[string]*fx.App{
				"lifecycle.Options":     fx.New(fx.NopLogger, fxstore.Module, lifecycle.Options(cfg)),
				"a Config in the graph": fx.New(fx.NopLogger, fxstore.Module, lifecycle.Module, fx.Supply(cfg)),
			} {
				err := app.Err()
				require.Error(t, err, how)
				for _, want := range tt.want {
					assert.Contains(t, err.Error(), want, how)
				}
			}
		})
	}
}

// memoryCertificate is a serving certificate for 127.0.0.1 that exists
// only in memory.
func memoryCertificate(t *testing.T) tls.Certificate {
	t.Helper()
	crt, key, err := certutil.GenerateSelfSignedCertKey("memory.example", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(crt, key)
	require.NoError(t, err)
	return cert
}

// A module's WebhookTLS option serves the webhook certificate from
// memory (GetCertificate), with no certificate file, after the app's own
// settings; a setting the app was not given is the module's to make.
func TestWebhookTLSFromAModule(t *testing.T) {
	cert := memoryCertificate(t)
	opts := webhookOptions(t)
	opts.Cert = lifecycle.CertFiles{} // no certificate files
	ta := newTestApp(t, lifecycle.Config{Webhook: opts},
		lifecycle.Webhook("/hook", http.HandlerFunc(hello)),
		lifecycle.WebhookTLS(
			func(c *tls.Config) {
				c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
			},
			func(c *tls.Config) { c.MinVersion = tls.VersionTLS13 },
		),
	)
	ta.app.RequireStart()
	defer ta.app.RequireStop()
	addr := net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
	state, err := handshake(t, addr, &tls.Config{NextProtos: []string{"h2", "http/1.1"}})
	require.NoError(t, err)
	require.NotEmpty(t, state.PeerCertificates)
	assert.Equal(t, cert.Certificate[0], state.PeerCertificates[0].Raw, "the certificate in memory is served")
	assert.Equal(t, "http/1.1", state.NegotiatedProtocol, "the app's settings apply too: HTTP/2 is off")
	_, err = handshake(t, addr, &tls.Config{MaxVersion: tls.VersionTLS12})
	assert.Error(t, err, "the module's minimum version applies")
}

// A module's option that would undo what the app's flags set, or hide
// what it sets itself, fails fx.New, saying what to do instead.
func TestWebhookTLSConflicts(t *testing.T) {
	serve := func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }
	}
	tests := []struct {
		name string
		cfg  lifecycle.Config
		give []lifecycle.WebhookTLSOption
		want []string
	}{
		{
			name: "minimum version",
			cfg:  lifecycle.Config{TLS: lifecycle.TLSOptions{MinVersion: "VersionTLS13"}},
			give: []lifecycle.WebhookTLSOption{func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }},
			want: []string{"sets MinVersion TLS 1.2, but --tls-min-version is VersionTLS13; leave the minimum version to the flag"},
		},
		{
			name: "cipher suites",
			cfg:  lifecycle.Config{TLS: lifecycle.TLSOptions{CipherSuites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}}},
			give: []lifecycle.WebhookTLSOption{func(c *tls.Config) { c.CipherSuites = nil }},
			want: []string{"sets CipherSuites, but --tls-cipher-suites is TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256; leave the cipher suites to the flag"},
		},
		{
			name: "HTTP/2",
			give: []lifecycle.WebhookTLSOption{func(c *tls.Config) { c.NextProtos = []string{"h2", "http/1.1"} }},
			want: []string{`sets NextProtos ["h2" "http/1.1"]; turn HTTP/2 on or off with --enable-http2 instead`},
		},
		{
			name: "a certificate and certificate files",
			cfg:  lifecycle.Config{Webhook: lifecycle.WebhookOptions{Cert: lifecycle.CertFiles{Path: "/etc/certs"}}},
			give: []lifecycle.WebhookTLSOption{serve},
			want: []string{"serves a certificate (GetCertificate), so the files in --webhook-cert-path /etc/certs would not be served; drop the flag, or the option"},
		},
		{
			name: "two certificates",
			give: []lifecycle.WebhookTLSOption{serve, serve},
			want: []string{" each serve a certificate (GetCertificate); only the last would be served: keep one"},
		},
		{
			name: "static certificates",
			give: []lifecycle.WebhookTLSOption{func(c *tls.Config) { c.Certificates = []tls.Certificate{{}} }},
			want: []string{"sets Certificates, which the webhook server's certificate files would hide; set GetCertificate instead"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fx.New(fx.NopLogger, fxstore.Module, lifecycle.Options(tt.cfg), lifecycle.WebhookTLS(tt.give...)).Err()
			require.Error(t, err)
			for _, want := range tt.want {
				assert.Contains(t, err.Error(), want)
			}
			assert.Contains(t, err.Error(), "webhook TLS option lifecycle_test.TestWebhookTLSConflicts.", "the option is named")
		})
	}
	t.Run("none", func(t *testing.T) {
		require.NoError(t, fx.New(fx.NopLogger, fxstore.Module, lifecycle.Options(lifecycle.Config{}), lifecycle.WebhookTLS(serve)).Err())
	})
	t.Run("nil", func(t *testing.T) {
		err := fx.New(fx.NopLogger, fxstore.Module, lifecycle.Options(lifecycle.Config{}), lifecycle.WebhookTLS(serve, nil)).Err()
		assert.ErrorContains(t, err, "lifecycle.WebhookTLS: option 1 is nil")
	})
}
