package kubeconfig

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

var (
	// ErrCredentialPlugin is wrapped by the error of a kubeconfig whose
	// user runs an exec credential plugin or an auth-provider, which the
	// Policy does not allow.
	ErrCredentialPlugin = errors.New("a kubeconfig given as data must not run commands in the controller: " +
		"embed a token or a client certificate in it, or allow credential plugins (--cluster-secrets-allow-credential-plugins, Policy.AllowCredentialPlugins)")

	// ErrLocalFile is wrapped by the error of a kubeconfig that names a
	// file of the controller's own, which the Policy does not allow.
	ErrLocalFile = errors.New("a kubeconfig given as data must not read the controller's files: " +
		"embed the data (certificate-authority-data, client-certificate-data, client-key-data, token), " +
		"or allow local files (--cluster-secrets-allow-local-files, Policy.AllowLocalFiles)")
)

// Policy says what a kubeconfig may make the controller do besides
// connecting. The zero Policy allows neither: a kubeconfig is then data.
type Policy struct {
	// AllowCredentialPlugins lets the kubeconfig's user run an exec
	// credential plugin, or use an auth-provider. Defaults to refusing
	// them: whoever writes the kubeconfig would choose a command the
	// controller runs.
	AllowCredentialPlugins bool

	// AllowLocalFiles lets the kubeconfig name files to read:
	// certificate-authority, client-certificate, client-key and
	// tokenFile. Defaults to refusing them: whoever writes the kubeconfig
	// would choose a file of the controller's, such as its service
	// account token, to send to a server they chose.
	AllowLocalFiles bool
}

// LoadOptions say how Load turns a kubeconfig into a client config.
type LoadOptions struct {
	// Context is the kubeconfig's context to use. Defaults to its
	// current-context.
	Context string

	// Policy says what the kubeconfig may do besides connecting.
	Policy
}

// Load returns the client config of a kubeconfig's context, given the
// kubeconfig's YAML or JSON. It refuses what opts.Policy does not allow:
// such an error wraps ErrCredentialPlugin or ErrLocalFile, and lists
// every refused field. Only the context used is checked; other contexts
// of the kubeconfig are never read.
func Load(data []byte, opts LoadOptions) (*rest.Config, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("parse kubeconfig: %w; give a kubeconfig file's YAML or JSON", err)
	}
	return restConfig(cfg, opts)
}

// restConfig returns the client config of a parsed kubeconfig's context.
func restConfig(cfg *clientcmdapi.Config, opts LoadOptions) (*rest.Config, error) {
	name := opts.Context
	if name == "" {
		name = cfg.CurrentContext
	}
	contexts := slices.Sorted(maps.Keys(cfg.Contexts))
	if name == "" {
		if len(contexts) == 0 {
			return nil, errors.New("kubeconfig has no context; give one with a cluster and a user, and set current-context")
		}
		return nil, fmt.Errorf("kubeconfig has no current-context; set it to one of its contexts: %s", strings.Join(contexts, ", "))
	}
	kctx, ok := cfg.Contexts[name]
	if !ok {
		return nil, fmt.Errorf("kubeconfig has no context %q; its contexts are: %s", name, strings.Join(contexts, ", "))
	}
	// clientcmd says "no configuration has been provided" of a missing
	// cluster or server, and suggests KUBERNETES_MASTER: name them.
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("kubeconfig context %q names the cluster %q, which the kubeconfig does not define; its clusters are: %s",
			name, kctx.Cluster, strings.Join(slices.Sorted(maps.Keys(cfg.Clusters)), ", "))
	}
	// clientcmd connects anonymously as a user the kubeconfig lacks,
	// which is a typo more often than a wish.
	if _, ok := cfg.AuthInfos[kctx.AuthInfo]; kctx.AuthInfo != "" && !ok {
		return nil, fmt.Errorf("kubeconfig context %q names the user %q, which the kubeconfig does not define; its users are: %s",
			name, kctx.AuthInfo, strings.Join(slices.Sorted(maps.Keys(cfg.AuthInfos)), ", "))
	}
	if cluster.Server == "" {
		return nil, fmt.Errorf("kubeconfig cluster %q of context %q has no server; set its server URL", kctx.Cluster, name)
	}
	if err := opts.Policy.check(cfg, name, kctx); err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %q: %w", name, err)
	}
	return rc, nil
}

// check returns what p refuses in the cluster and the user of context
// kctx, named name: one error for plugins and one for files, each
// listing every field refused.
func (p Policy) check(cfg *clientcmdapi.Config, name string, kctx *clientcmdapi.Context) error {
	var plugins, files []string
	if user := cfg.AuthInfos[kctx.AuthInfo]; user != nil {
		if !p.AllowCredentialPlugins && user.Exec != nil {
			plugins = append(plugins, fmt.Sprintf("user %q runs the exec credential plugin %q", kctx.AuthInfo, user.Exec.Command))
		}
		if !p.AllowCredentialPlugins && user.AuthProvider != nil {
			plugins = append(plugins, fmt.Sprintf("user %q uses the auth-provider %q", kctx.AuthInfo, user.AuthProvider.Name))
		}
		if !p.AllowLocalFiles {
			for _, f := range []struct{ field, path string }{
				{"client-certificate", user.ClientCertificate},
				{"client-key", user.ClientKey},
				{"tokenFile", user.TokenFile},
			} {
				if f.path != "" {
					files = append(files, fmt.Sprintf("user %q reads %s from %q", kctx.AuthInfo, f.field, f.path))
				}
			}
		}
	}
	if cluster := cfg.Clusters[kctx.Cluster]; cluster != nil && !p.AllowLocalFiles && cluster.CertificateAuthority != "" {
		files = append(files, fmt.Sprintf("cluster %q reads certificate-authority from %q", kctx.Cluster, cluster.CertificateAuthority))
	}
	var errs []error
	for _, r := range []struct {
		found    []string
		sentinel error
	}{{plugins, ErrCredentialPlugin}, {files, ErrLocalFile}} {
		if len(r.found) > 0 {
			errs = append(errs, fmt.Errorf("kubeconfig context %q: %s; %w", name, strings.Join(r.found, ", "), r.sentinel))
		}
	}
	return errors.Join(errs...)
}
