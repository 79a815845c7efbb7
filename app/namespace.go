package app

import (
	"flag"
	"os"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/fxkube/fxkube/internal/podnamespace"
)

// defaultLeaseNamespaces picks the namespace of the Leases of leader
// election and sharding where no flag set it and the app runs outside a
// cluster, as kubectl picks a namespace: the current context's of the
// kubeconfig (when fromKubeconfig), else "default". It logs the choice.
// In a pod, lifecycle and fxshard default to the pod's namespace.
func (a *app) defaultLeaseNamespaces(log *zap.Logger, fromKubeconfig bool) {
	le, shards := &a.flags.lifecycle.LeaderElection.Namespace, &a.flags.shards.Namespace
	if *le != "" && *shards != "" {
		return
	}
	if _, err := os.Stat(podnamespace.Path); err == nil {
		return // in a pod
	}
	ns, context := "default", ""
	if fromKubeconfig {
		if n, c, err := kubeconfigNamespace(); err == nil {
			ns, context = n, c
		} else {
			log.Warn("the kubeconfig's namespace cannot be read; the Leases go to the default namespace", zap.Error(err))
		}
	}
	for _, set := range []*string{le, shards} {
		if *set == "" {
			*set = ns
		}
	}
	fields := []zap.Field{zap.String("namespace", ns)}
	if context != "" {
		fields = append(fields, zap.String("kubeconfigContext", context))
	}
	log.Info("outside a cluster, the Leases of leader election and sharding go to the kubeconfig context's namespace, as kubectl's requests do; set --leader-election-namespace and --shard-namespace to choose another",
		fields...)
}

// kubeconfigNamespace returns the namespace of the kubeconfig's current
// context ("default" when it names none) and the context's name. The
// kubeconfig is found as controller-runtime finds it: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config.
func kubeconfigNamespace() (namespace, context string, err error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f := flag.CommandLine.Lookup(config.KubeconfigFlagName); f != nil {
		rules.ExplicitPath = f.Value.String()
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	if namespace, _, err = cc.Namespace(); err != nil {
		return "", "", err
	}
	raw, err := cc.RawConfig()
	if err != nil {
		return "", "", err
	}
	return namespace, raw.CurrentContext, nil
}
