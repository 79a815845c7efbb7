package testenv

import (
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig returns a kubeconfig file's content for cfg, such as one
// of [Config] or [User], with its certificates and token embedded: what
// a kubeconfig Secret of a member cluster holds.
func Kubeconfig(tb testing.TB, cfg *rest.Config) []byte {
	tb.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["testenv"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "testenv"}
	kc.CurrentContext = "testenv"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		tb.Fatalf("write a kubeconfig of %s: %v", cfg.Host, err)
	}
	return data
}
