package lifecycletest

import (
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fxkube/fxkube/lifecycle"
)

// EnvtestConfig returns the lifecycle.Config of an app under test on
// envtest:
//   - the webhook server serves where envtest pointed the webhook
//     configurations and CRD conversions it installed: hooks'
//     LocalServingHost and LocalServingPort, with the certificate files in
//     LocalServingCertDir (none, when a module serves its certificate
//     from memory with lifecycle.WebhookTLS);
//   - the metrics and probe servers are off (addresses "0"): a suite does
//     not read them, and suites run side by side would fight over their
//     ports.
//
// Pass the suite's testEnv.WebhookInstallOptions once testEnv.Start has
// filled them in, or a zero value when it installs no webhooks.
func EnvtestConfig(hooks envtest.WebhookInstallOptions) lifecycle.Config {
	return lifecycle.Config{
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
		Webhook: lifecycle.WebhookOptions{
			Host: hooks.LocalServingHost,
			Port: hooks.LocalServingPort,
			Cert: lifecycle.CertFiles{Path: hooks.LocalServingCertDir},
		},
	}
}
