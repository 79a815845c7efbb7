package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fxkube/fxkube/lifecycle"
)

// parse parses args as the commands that run the app do, without running it.
func parse(t *testing.T, args ...string) (*app, *cobra.Command) {
	t.Helper()
	a := &app{name: "demo"}
	cmd := &cobra.Command{Use: "demo"}
	a.registerFlags(cmd)
	require.NoError(t, cmd.ParseFlags(args))
	return a, cmd
}

// defaults returns lifecycle.Config as the flags leave it when none is
// given.
func defaults() lifecycle.Config {
	var c lifecycle.Config
	c.SyncTimeout, c.StopTimeout = 2*time.Minute, 30*time.Second
	c.StoreFailureTimeout = 5 * time.Minute
	c.MetricsBindAddress, c.MetricsSecure = "0", true
	c.MetricsCert.Name, c.MetricsCert.Key = "tls.crt", "tls.key"
	c.PprofBindAddress = "0"
	c.Webhook.Port = 9443
	c.Webhook.Cert.Name, c.Webhook.Cert.Key = "tls.crt", "tls.key"
	c.HealthProbeBindAddress = ":8081"
	c.LeaderElection.Name = "demo"
	return c
}

func TestFlagsMapToTheLifecycleConfig(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want func(*lifecycle.Config)
	}{
		{name: "none", want: func(*lifecycle.Config) {}},
		{
			name: "kubebuilder's manifests with cert-manager",
			give: []string{
				"--metrics-bind-address=:8443", "--leader-elect", "--health-probe-bind-address=:8081",
				"--metrics-cert-path=/tmp/x", "--webhook-cert-path=/tmp/y", "--zap-log-level=debug", "--zap-devel",
			},
			want: func(c *lifecycle.Config) {
				c.MetricsBindAddress = ":8443"
				c.LeaderElection.Enabled = true
				c.MetricsCert.Path = "/tmp/x"
				c.Webhook.Cert.Path = "/tmp/y"
			},
		},
		{
			name: "every other kubebuilder flag",
			give: []string{
				"--metrics-secure=false", "--metrics-cert-name=m.crt", "--metrics-cert-key=m.key",
				"--webhook-cert-name=w.crt", "--webhook-cert-key=w.key", "--enable-http2",
			},
			want: func(c *lifecycle.Config) {
				c.MetricsSecure = false
				c.MetricsCert.Name, c.MetricsCert.Key = "m.crt", "m.key"
				c.Webhook.Cert.Name, c.Webhook.Cert.Key = "w.crt", "w.key"
				c.EnableHTTP2 = true
			},
		},
		{
			name: "kube-apiserver's TLS flags",
			give: []string{"--tls-min-version=VersionTLS13", "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
			want: func(c *lifecycle.Config) {
				c.TLS.MinVersion = "VersionTLS13"
				c.TLS.CipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
			},
		},
		{
			name: "controller-runtime's",
			give: []string{"--webhook-port=9444", "--pprof-bind-address=:6060", "--leader-election-namespace=ops", "--leader-election-id=lock"},
			want: func(c *lifecycle.Config) {
				c.Webhook.Port = 9444
				c.PprofBindAddress = ":6060"
				c.LeaderElection.Namespace, c.LeaderElection.Name = "ops", "lock"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := parse(t, tt.give...)
			want := defaults()
			tt.want(&want)
			assert.Equal(t, want, a.flags.lifecycle)
		})
	}
}

func TestKubebuilderFlagsHaveTheirDefaults(t *testing.T) {
	// The flags of kubebuilder's scaffolded cmd/main.go, and their
	// defaults; the zap flags' are those of zap.Options{Development: true}.
	kubebuilder := map[string]string{
		"metrics-bind-address":      "0",
		"health-probe-bind-address": ":8081",
		"leader-elect":              "false",
		"metrics-secure":            "true",
		"webhook-cert-path":         "",
		"webhook-cert-name":         "tls.crt",
		"webhook-cert-key":          "tls.key",
		"metrics-cert-path":         "",
		"metrics-cert-name":         "tls.crt",
		"metrics-cert-key":          "tls.key",
		"enable-http2":              "false",
		"zap-devel":                 "true",
		"zap-encoder":               "",
		"zap-log-level":             "",
		"zap-stacktrace-level":      "",
		"zap-time-encoding":         "",
	}
	_, cmd := parse(t)
	for name, want := range kubebuilder {
		f := cmd.Flags().Lookup(name)
		if assert.NotNil(t, f, "--%s", name) {
			assert.Equal(t, want, f.DefValue, "--%s", name)
		}
	}
}

func TestZapFlagsBuildControllerRuntimesLogger(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want func(t *testing.T, out string)
	}{
		{
			name: "console",
			give: []string{"--zap-devel=false", "--zap-encoder=console"},
			want: func(t *testing.T, out string) {
				assert.Regexp(t, `^\S+\tINFO\tinfo line\n`, out, "a console line, not JSON")
				assert.NotContains(t, out, "debug line")
			},
		},
		{
			name: "json",
			give: []string{"--zap-devel=false", "--zap-time-encoding=epoch"},
			want: func(t *testing.T, out string) {
				var line struct {
					Level string  `json:"level"`
					TS    float64 `json:"ts"`
					Msg   string  `json:"msg"`
				}
				first, _, _ := strings.Cut(out, "\n")
				require.NoError(t, json.Unmarshal([]byte(first), &line), out)
				assert.Equal(t, "info", line.Level)
				assert.Equal(t, "info line", line.Msg)
				assert.Greater(t, line.TS, 1e9, "seconds since the epoch")
			},
		},
		{
			name: "kubebuilder's development default",
			give: []string{"--zap-log-level=debug"},
			want: func(t *testing.T, out string) {
				assert.Contains(t, out, "\tDEBUG\tdebug line\n")
				assert.Contains(t, out, "\tINFO\tinfo line\n")
			},
		},
		{
			name: "level error drops info",
			give: []string{"--zap-log-level=error"},
			want: func(t *testing.T, out string) {
				assert.NotContains(t, out, "info line")
				assert.Contains(t, out, "\tERROR\terror line\n")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := parse(t, tt.give...)
			var out bytes.Buffer
			a.flags.zap.DestWriter = &out
			log, err := a.newLogger()
			require.NoError(t, err)
			log.Debug("debug line")
			log.Info("info line")
			log.Error("error line")
			tt.want(t, out.String())
		})
	}
}

func TestZapAndLogFlagsConflict(t *testing.T) {
	a, _ := parse(t, "--zap-encoder=console", "--log-level=debug")
	_, err := a.newLogger()
	require.EqualError(t, err, "--zap-encoder and --log-level both configure the logger; use either the --zap-* flags or --log-level and --log-format")

	cmd := Command("demo")
	cmd.SetArgs([]string{"run", "--log-format=console", "--zap-devel"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	require.ErrorContains(t, cmd.Execute(), "--zap-devel and --log-format both configure the logger")
}
