// Package lifecycletest runs an fxkube app in a test suite on envtest, as
// the suite ran a controller-runtime manager there.
//
// EnvtestConfig maps envtest's WebhookInstallOptions onto the app's
// webhook server, with the metrics and probe servers off:
//
//	app := fx.New(
//		fx.Supply(cfg, logger),
//		fxstore.Module,
//		fxstore.AddToScheme(myv1.AddToScheme),
//		fxcontroller.Module,
//		fxcontroller.SetupWithManager(setup),
//		lifecycle.Options(lifecycletest.EnvtestConfig(testEnv.WebhookInstallOptions)),
//	)
//	go func() { err = lifecycle.Run(ctx, app) }()
package lifecycletest
