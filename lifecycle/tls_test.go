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
