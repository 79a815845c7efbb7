package lifecycle

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	cliflag "k8s.io/component-base/cli/flag"
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
