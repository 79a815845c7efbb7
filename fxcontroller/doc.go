// Package fxcontroller runs controller-runtime reconcilers on fxstore's
// shared stores, as fx modules.
//
// A controller module declares a controller with Provide. Its constructor
// asks the registry for stores by watch spec. It returns what New makes of:
//
//   - a name, unique in the app;
//   - the primary store, whose objects it reconciles;
//   - a reconcile.Reconciler;
//   - options, such as Watches for secondary stores whose changes map to
//     primary objects.
//
// For example:
//
//	var Module = fx.Module("rollout", fxcontroller.Provide(newController))
//
//	func newController(stores *fxstore.Registry, c client.Client, events fxcontroller.RecorderProvider) (*fxcontroller.Controller, error) {
//		deployments, err := fxstore.For[*appsv1.Deployment](stores, fxstore.Spec{})
//		if err != nil {
//			return nil, err
//		}
//		configMaps, err := fxstore.For[*corev1.ConfigMap](stores, fxstore.Spec{})
//		if err != nil {
//			return nil, err
//		}
//		r := &reconciler{deployments: deployments, client: c, events: events.GetEventRecorder("rollout")}
//		return fxcontroller.New("rollout", deployments, r,
//			fxcontroller.Watches(configMaps, handler.EnqueueRequestsFromMapFunc(r.deploymentsUsing)),
//			fxcontroller.WithPredicates(predicate.GenerationChangedPredicate{}),
//			fxcontroller.Writes(appsv1.Resource("deployments"), "update", "patch"))
//	}
//
// A controller adds no watch of its own to the API server. It subscribes
// to the informers behind its stores, which every module asking for the
// same spec shares. The app's lifecycle starts controllers once every
// store has synced, and only on the leader when leader election is on.
//
// Underneath is controller-runtime's controller. Its workqueue, rate
// limiting, concurrency, panic recovery and metrics are controller-runtime's
// (controller_runtime_reconcile_total and the rest). A reconciler written
// for kubebuilder runs unchanged: reconcile.Request, reconcile.Result,
// reconcile.TerminalError and log.FromContext work as there. LoggerFrom
// gives the context's logger as a *zap.Logger.
//
// Module provides what reconcilers act with:
//
//   - a client.Client, for writes and direct reads;
//   - a RecorderProvider, for events.k8s.io/v1 Events.
//
// The fxcontrollertest package provides in-memory stand-ins for unit tests.
//
// # Reading through stores
//
// Reconcilers should read the objects they watch through their stores,
// not the client. A store read is a map lookup and costs the API server
// nothing. It returns the object the store holds, without a copy. Every
// controller and module of the process shares that object, so never
// change it. Copy it, change the copy, and write the copy:
//
//	deployment, err := r.deployments.Get(req.Namespace, req.Name)
//	if err != nil {
//		return reconcile.Result{}, client.IgnoreNotFound(err)
//	}
//	deployment = deployment.DeepCopy() // copy before mutating
//	deployment.Spec.Replicas = ptr.To[int32](3)
//	return reconcile.Result{}, r.client.Update(ctx, deployment)
//
// A store sees a write once its watch delivers it, moments later. A
// reconcile that reads its store just after a write may see the object as
// it was. Its update then fails with a conflict, and the request is
// retried. controller-runtime's cached client behaves the same.
//
// # Hosting controller-runtime operators
//
// SetupWithManager runs an existing operator's setup unchanged: its
// SetupWithManager calls, field indexes, runnables and checks. It gets a
// manager.Manager façade over the app. Its cache is storecache.New's
// over the app's registry, so its informers are the app's shared stores.
// What it runs runs under the app's lifecycle.
//
// WithManagerOptions takes the ctrl.Options of the operator's main as
// they are. What only a manager of its own could do fails fx.New, naming
// the field and the flag to use instead. WithLogr gives it its logr
// logger.
//
// # Choosing and stopping controllers
//
// The app's --controllers flag (Selection) chooses the controllers it
// has. Switch, which Collect provides, disables and enables them by name
// while it runs. A disabled controller finishes its reconciles in
// flight, drops its queue and, with WhenServed, gives back its stores.
//
// # What a controller declares
//
// Info reports a controller's name, stores and declared writes. The app's
// describe and rbac commands work from it. rbac grants:
//
//   - list and watch on every store;
//   - the writes declared with Writes;
//   - what event recorders need.
package fxcontroller
