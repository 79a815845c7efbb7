package lifecycletest_test

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fxkube/fxkube/lifecycle/lifecycletest"
)

// envtest's webhook install options, as testEnv.Start leaves them, become
// the app's webhook server; its metrics and probes are off.
func ExampleEnvtestConfig() {
	hooks := envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1", LocalServingPort: 39443, LocalServingCertDir: "/tmp/envtest-serving-certs-1"}
	cfg := lifecycletest.EnvtestConfig(hooks)
	fmt.Printf("webhooks on %s:%d, certificate in %s\n", cfg.Webhook.Host, cfg.Webhook.Port, cfg.Webhook.Cert.Path)
	fmt.Printf("metrics %q, probes %q\n", cfg.MetricsBindAddress, cfg.HealthProbeBindAddress)
	// Output:
	// webhooks on 127.0.0.1:39443, certificate in /tmp/envtest-serving-certs-1
	// metrics "0", probes "0"
}
