package lifecycle

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/fx"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/fxkube/fxkube/internal/caller"
)

// TLSOptions set what the app's metrics and webhook servers accept in a
// TLS handshake. They take the names and values of kube-apiserver's
// --tls-min-version and --tls-cipher-suites, parsed by component-base's
// cli/flag, as every Kubernetes component parses them.
type TLSOptions struct {
	// MinVersion is the lowest TLS version served: VersionTLS10,
	// VersionTLS11, VersionTLS12 or VersionTLS13. Defaults to Go's
	// default, TLS 1.2.
	MinVersion string

	// CipherSuites are the cipher suites offered up to TLS 1.2, named as
	// crypto/tls names them, such as
	// TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256. Go does not let TLS 1.3's be
	// chosen. Defaults to Go's.
	CipherSuites []string
}

// serverTLS returns the TLS settings c gives the app's servers: HTTP/2
// off unless enabled, as kubebuilder's scaffold has it against HTTP/2's
// Stream Cancellation and Rapid Reset CVEs, then the minimum version and
// the cipher suites. An unknown name is an error that names the flag and
// the names it takes.
func (c Config) serverTLS() ([]func(*tls.Config), error) {
	var opts []func(*tls.Config)
	if !c.EnableHTTP2 {
		opts = append(opts, func(t *tls.Config) { t.NextProtos = []string{"http/1.1"} })
	}
	if name := c.TLS.MinVersion; name != "" {
		version, err := cliflag.TLSVersion(name)
		if err != nil {
			return nil, fmt.Errorf("--tls-min-version: unknown TLS version %q; use one of %s", name, strings.Join(cliflag.TLSPossibleVersions(), ", "))
		}
		opts = append(opts, func(t *tls.Config) { t.MinVersion = version })
	}
	if names := c.TLS.CipherSuites; len(names) > 0 {
		var unknown []string
		for _, name := range names {
			if _, err := cliflag.TLSCipherSuites([]string{name}); err != nil {
				unknown = append(unknown, name)
			}
		}
		if len(unknown) > 0 {
			return nil, fmt.Errorf("--tls-cipher-suites: unknown cipher suites %q; use names of crypto/tls: %s (insecure: %s)",
				unknown, strings.Join(cliflag.PreferredTLSCipherNames(), ", "), strings.Join(cliflag.InsecureTLSCipherNames(), ", "))
		}
		suites, err := cliflag.TLSCipherSuites(names)
		if err != nil {
			return nil, fmt.Errorf("--tls-cipher-suites: %w", err)
		}
		opts = append(opts, func(t *tls.Config) { t.CipherSuites = slices.Clone(suites) })
	}
	return opts, nil
}

// webhookTLSGroup is the fx value group of the WebhookTLSOptions that
// modules give the app's webhook server.
const webhookTLSGroup = "fxkube.webhook-tls"

// WebhookTLSOption changes the TLS config of the app's webhook server, as
// an entry of controller-runtime's webhook.Options.TLSOpts does. It runs
// after the app's own settings (--tls-min-version, --tls-cipher-suites,
// --enable-http2).
type WebhookTLSOption func(*tls.Config)

// WebhookTLS adds opts to the TLS config of the app's webhook server. A
// module serves its certificate from memory this way, as a manager's
// webhook.Options.TLSOpts would:
//
//	lifecycle.WebhookTLS(func(c *tls.Config) { c.GetCertificate = source.GetCertificate })
//
// A constructor that needs values of the graph returns a WebhookTLSOption
// into the value group "fxkube.webhook-tls" instead:
//
//	fx.Provide(fx.Annotate(newCertificateOption, fx.ResultTags(`group:"fxkube.webhook-tls"`)))
//
// The options may not undo what the app was told. fx.New fails, saying
// what to do instead, when an option:
//   - changes the minimum version or the cipher suites that
//     --tls-min-version or --tls-cipher-suites set;
//   - changes NextProtos, which --enable-http2 sets;
//   - serves a certificate (GetCertificate) while --webhook-cert-path
//     names files, or while another option serves one;
//   - sets Certificates, which the server's certificate files would hide.
func WebhookTLS(opts ...WebhookTLSOption) fx.Option {
	out := make([]fx.Option, len(opts))
	for i, opt := range opts {
		if opt == nil {
			return fx.Error(fmt.Errorf("lifecycle.WebhookTLS: option %d is nil", i))
		}
		out[i] = fx.Provide(fx.Annotate(func() WebhookTLSOption { return opt }, fx.ResultTags(`group:"`+webhookTLSGroup+`"`)))
	}
	return fx.Options(out...)
}

// webhookTLS returns the TLS settings of the app's webhook server: the
// app's, then the modules' opts, once checked against the app's.
func (c Config) webhookTLS(opts []WebhookTLSOption) ([]func(*tls.Config), error) {
	own, err := c.serverTLS()
	if err != nil {
		return nil, err
	}
	if err := c.checkWebhookTLS(own, opts); err != nil {
		return nil, err
	}
	for _, opt := range opts {
		own = append(own, opt)
	}
	return own, nil
}

// checkWebhookTLS applies each of opts to a config made by the app's own
// settings, and reports what one would undo or hide.
func (c Config) checkWebhookTLS(own []func(*tls.Config), opts []WebhookTLSOption) error {
	base := &tls.Config{}
	for _, o := range own {
		o(base)
	}
	var (
		errs    []error
		servers []string // options that serve a certificate
	)
	for _, opt := range opts {
		name := "webhook TLS option " + caller.Of(opt)
		got := base.Clone()
		opt(got)
		if c.TLS.MinVersion != "" && got.MinVersion != base.MinVersion {
			errs = append(errs, fmt.Errorf("%s sets MinVersion %s, but --tls-min-version is %s; leave the minimum version to the flag",
				name, tls.VersionName(got.MinVersion), c.TLS.MinVersion))
		}
		if len(c.TLS.CipherSuites) > 0 && !slices.Equal(got.CipherSuites, base.CipherSuites) {
			errs = append(errs, fmt.Errorf("%s sets CipherSuites, but --tls-cipher-suites is %s; leave the cipher suites to the flag",
				name, strings.Join(c.TLS.CipherSuites, ",")))
		}
		if !slices.Equal(got.NextProtos, base.NextProtos) {
			errs = append(errs, fmt.Errorf("%s sets NextProtos %q; turn HTTP/2 on or off with --enable-http2 instead", name, got.NextProtos))
		}
		if len(got.Certificates) > len(base.Certificates) && got.GetCertificate == nil {
			errs = append(errs, fmt.Errorf("%s sets Certificates, which the webhook server's certificate files would hide; set GetCertificate instead", name))
		}
		if got.GetCertificate != nil {
			servers = append(servers, name)
		}
	}
	switch {
	case len(servers) > 1:
		errs = append(errs, fmt.Errorf("%s each serve a certificate (GetCertificate); only the last would be served: keep one", strings.Join(servers, " and ")))
	case len(servers) == 1 && c.Webhook.Cert.Path != "":
		errs = append(errs, fmt.Errorf("%s serves a certificate (GetCertificate), so the files in --webhook-cert-path %s would not be served; drop the flag, or the option",
			servers[0], c.Webhook.Cert.Path))
	}
	return errors.Join(errs...)
}
