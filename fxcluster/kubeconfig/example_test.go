package kubeconfig_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcluster/kubeconfig"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/lifecycle"
)

const tokenKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: eu
  cluster: {server: "https://eu.example:6443"}
users:
- name: controller
  user: {token: "t0ken"}
contexts:
- name: eu
  context: {cluster: eu, user: controller}
current-context: eu
`

// A kubeconfig that runs a command is refused, unless the Policy allows
// it.
func ExampleLoad() {
	execKubeconfig := []byte(strings.Replace(tokenKubeconfig, `{token: "t0ken"}`,
		`{exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, interactiveMode: Never}}`, 1))
	_, err := kubeconfig.Load(execKubeconfig, kubeconfig.LoadOptions{})
	fmt.Println(errors.Is(err, kubeconfig.ErrCredentialPlugin))
	fmt.Println(err)

	cfg, err := kubeconfig.Load(execKubeconfig, kubeconfig.LoadOptions{Policy: kubeconfig.Policy{AllowCredentialPlugins: true}})
	fmt.Println(cfg.Host, cfg.ExecProvider.Command, err)
	// Output:
	// true
	// kubeconfig context "eu": user "controller" runs the exec credential plugin "aws"; a kubeconfig given as data must not run commands in the controller: embed a token or a client certificate in it, or allow credential plugins (--cluster-secrets-allow-credential-plugins, Policy.AllowCredentialPlugins)
	// https://eu.example:6443 aws <nil>
}

func ExampleParseFile() {
	f, err := kubeconfig.ParseFile("us=/etc/fleet/all.kubeconfig@kubernetes-admin@us")
	fmt.Printf("%s %s %s %v\n", f.Name, f.Path, f.Context, err)
	_, err = kubeconfig.ParseFile("/etc/fleet/all.kubeconfig")
	fmt.Println(err)
	// Output:
	// us /etc/fleet/all.kubeconfig kubernetes-admin@us <nil>
	// cluster kubeconfig "/etc/fleet/all.kubeconfig": want NAME=PATH[@CONTEXT], such as eu=/etc/fleet/eu.kubeconfig
}

// printer is an fxcluster.Aware that prints the clusters it is given.
type printer struct{ engaged chan context.Context }

func (p printer) Engage(ctx context.Context, name fxcluster.ClusterName, cfg *rest.Config) error {
	fmt.Println("engaged", name, "at", cfg.Host)
	p.engaged <- ctx
	return nil
}

// The Secret eu is a kubeconfig Secret, as multicluster-runtime's
// provider reads them; the app engages its cluster once the Secrets'
// store has synced. The in-memory fxstoretest.Module stands in for the
// app's own cluster.
func ExampleProvideSecrets() {
	eu := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "eu",
			Labels: map[string]string{kubeconfig.DefaultSecretLabel: "true"}},
		Data: map[string][]byte{kubeconfig.DefaultSecretKey: []byte(tokenKubeconfig)},
	}
	var providers []fxcluster.Provider
	app := fx.New(
		fx.NopLogger,
		fxstoretest.Module(eu),
		kubeconfig.ProvideSecrets(kubeconfig.SecretOptions{Namespace: "fleet"}),
		fx.Invoke(fx.Annotate(func(ps []fxcluster.Provider) { providers = ps }, fx.ParamTags(`group:"fxkube.cluster-providers"`))),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}),
	)
	if err := app.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = app.Stop(context.Background()) }()

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	clusters := printer{engaged: make(chan context.Context, 1)}
	go func() { done <- providers[0].Start(ctx, clusters) }()
	cluster := <-clusters.engaged
	stop()
	fmt.Println(<-done)
	<-cluster.Done()
	fmt.Println("cluster eu left")
	// Output:
	// engaged eu at https://eu.example:6443
	// <nil>
	// cluster eu left
}
