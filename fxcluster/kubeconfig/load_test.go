package kubeconfig_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fxkube/fxkube/fxcluster/kubeconfig"
)

// kubeconfigOf returns a kubeconfig with contexts "a" (current, a token)
// and "b" (a client certificate, on another server), changed by edit.
func kubeconfigOf(t *testing.T, edit func(*clientcmdapi.Config)) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["one"] = &clientcmdapi.Cluster{Server: "https://one.example:6443", CertificateAuthorityData: []byte("ca")}
	cfg.Clusters["two"] = &clientcmdapi.Cluster{Server: "https://two.example:6443"}
	cfg.AuthInfos["token"] = &clientcmdapi.AuthInfo{Token: "secret-token"}
	cfg.AuthInfos["cert"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	cfg.Contexts["a"] = &clientcmdapi.Context{Cluster: "one", AuthInfo: "token"}
	cfg.Contexts["b"] = &clientcmdapi.Context{Cluster: "two", AuthInfo: "cert"}
	cfg.CurrentContext = "a"
	if edit != nil {
		edit(cfg)
	}
	data, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return data
}

func execPlugin(cfg *clientcmdapi.Config) {
	cfg.AuthInfos["token"].Exec = &clientcmdapi.ExecConfig{Command: "aws", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name string
		give []byte
		opts kubeconfig.LoadOptions
		// wantHost and wantToken are what the config holds.
		wantHost, wantToken string
		// wantErr are parts of the error; wantIs is what it wraps.
		wantErr []string
		wantIs  []error
	}{
		{
			name:      "current context",
			give:      kubeconfigOf(t, nil),
			wantHost:  "https://one.example:6443",
			wantToken: "secret-token",
		},
		{
			name:     "context chosen",
			give:     kubeconfigOf(t, nil),
			opts:     kubeconfig.LoadOptions{Context: "b"},
			wantHost: "https://two.example:6443",
		},
		{
			name: "unused context not checked",
			give: kubeconfigOf(t, func(c *clientcmdapi.Config) {
				c.AuthInfos["cert"].Exec = &clientcmdapi.ExecConfig{Command: "aws", APIVersion: "client.authentication.k8s.io/v1"}
				c.AuthInfos["cert"].ClientCertificate = "/etc/cert"
			}),
			wantHost:  "https://one.example:6443",
			wantToken: "secret-token",
		},
		{
			name:    "exec plugin refused",
			give:    kubeconfigOf(t, execPlugin),
			wantErr: []string{`kubeconfig context "a": user "token" runs the exec credential plugin "aws"`, "Policy.AllowCredentialPlugins"},
			wantIs:  []error{kubeconfig.ErrCredentialPlugin},
		},
		{
			name:      "exec plugin allowed",
			give:      kubeconfigOf(t, execPlugin),
			opts:      kubeconfig.LoadOptions{Policy: kubeconfig.Policy{AllowCredentialPlugins: true}},
			wantHost:  "https://one.example:6443",
			wantToken: "secret-token",
		},
		{
			name: "auth-provider refused",
			give: kubeconfigOf(t, func(c *clientcmdapi.Config) {
				c.AuthInfos["token"].AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
			}),
			wantErr: []string{`user "token" uses the auth-provider "oidc"`},
			wantIs:  []error{kubeconfig.ErrCredentialPlugin},
		},
		{
			name: "client files refused",
			give: kubeconfigOf(t, func(c *clientcmdapi.Config) {
				c.AuthInfos["token"].ClientCertificate = "/etc/tls.crt"
				c.AuthInfos["token"].ClientKey = "/etc/tls.key"
			}),
			wantErr: []string{`user "token" reads client-certificate from "/etc/tls.crt", user "token" reads client-key from "/etc/tls.key"`, "Policy.AllowLocalFiles"},
			wantIs:  []error{kubeconfig.ErrLocalFile},
		},
		{
			name: "token file refused",
			give: kubeconfigOf(t, func(c *clientcmdapi.Config) {
				c.AuthInfos["token"].TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
			}),
			wantErr: []string{`user "token" reads tokenFile from "/var/run/secrets/kubernetes.io/serviceaccount/token"`},
			wantIs:  []error{kubeconfig.ErrLocalFile},
		},
		{
			name: "certificate authority file refused",
			give: kubeconfigOf(t, func(c *clientcmdapi.Config) {
				c.Clusters["one"].CertificateAuthorityData = nil
				c.Clusters["one"].CertificateAuthority = "ca.crt"
			}),
			wantErr: []string{`cluster "one" reads certificate-authority from "ca.crt"`},
			wantIs:  []error{kubeconfig.ErrLocalFile},
		},
		{
			name: "plugin and files refused at once",
			give: kubeconfigOf(t, func(c *clientcmdapi.Config) {
				execPlugin(c)
				c.AuthInfos["token"].TokenFile = "/token"
			}),
			wantErr: []string{`runs the exec credential plugin "aws"`, `reads tokenFile from "/token"`},
			wantIs:  []error{kubeconfig.ErrCredentialPlugin, kubeconfig.ErrLocalFile},
		},
		{
			name: "token file allowed",
			give: kubeconfigOf(t, func(c *clientcmdapi.Config) {
				c.AuthInfos["token"].TokenFile = "/token"
			}),
			opts:      kubeconfig.LoadOptions{Policy: kubeconfig.Policy{AllowLocalFiles: true}},
			wantHost:  "https://one.example:6443",
			wantToken: "secret-token",
		},
		{
			name:    "garbage",
			give:    []byte("\x00\x01 not a kubeconfig {"),
			wantErr: []string{"parse kubeconfig: ", "give a kubeconfig file's YAML or JSON"},
		},
		{
			name:    "wrong kind",
			give:    []byte("apiVersion: v1\nkind: Secret\n"),
			wantErr: []string{"parse kubeconfig: "},
		},
		{
			name:    "empty",
			give:    nil,
			wantErr: []string{"kubeconfig has no context; give one with a cluster and a user, and set current-context"},
		},
		{
			name:    "no current context",
			give:    kubeconfigOf(t, func(c *clientcmdapi.Config) { c.CurrentContext = "" }),
			wantErr: []string{"kubeconfig has no current-context; set it to one of its contexts: a, b"},
		},
		{
			name:    "unknown context",
			give:    kubeconfigOf(t, nil),
			opts:    kubeconfig.LoadOptions{Context: "c"},
			wantErr: []string{`kubeconfig has no context "c"; its contexts are: a, b`},
		},
		{
			name:    "context of a missing cluster",
			give:    kubeconfigOf(t, func(c *clientcmdapi.Config) { c.Contexts["a"].Cluster = "gone" }),
			wantErr: []string{`kubeconfig context "a" names the cluster "gone", which the kubeconfig does not define; its clusters are: one, two`},
		},
		{
			name:    "cluster without a server",
			give:    kubeconfigOf(t, func(c *clientcmdapi.Config) { c.Clusters["one"].Server = "" }),
			wantErr: []string{`kubeconfig cluster "one" of context "a" has no server; set its server URL`},
		},
		{
			name:    "context of a missing user",
			give:    kubeconfigOf(t, func(c *clientcmdapi.Config) { c.Contexts["a"].AuthInfo = "nobody" }),
			wantErr: []string{`kubeconfig context "a" names the user "nobody", which the kubeconfig does not define; its users are: cert, token`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := kubeconfig.Load(tt.give, tt.opts)
			if len(tt.wantErr) > 0 {
				require.Error(t, err)
				for _, want := range tt.wantErr {
					require.ErrorContains(t, err, want)
				}
				for _, want := range tt.wantIs {
					require.ErrorIs(t, err, want)
				}
				require.Nil(t, cfg)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantHost, cfg.Host)
			require.Equal(t, tt.wantToken, cfg.BearerToken)
		})
	}
}
