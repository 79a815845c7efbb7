package rollout

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
)

const (
	// ReloadAnnotation opts a Deployment in when its value is true, in any
	// form strconv.ParseBool accepts.
	ReloadAnnotation = "fxkube.io/reload"

	// ConfigHashAnnotation is set on the pod template of opted-in
	// Deployments to the hash of the ConfigMaps and Secrets it refers to.
	ConfigHashAnnotation = "fxkube.io/config-hash"
)

// controllerName is the name of the module's controller, in logs, metrics
// and as the reporting controller of its Events.
const controllerName = "rollout"

// Module runs the rollout controller. It needs fxstore.Module and
// fxcontroller.Module (or fxcontrollertest.Module).
var Module = fx.Module("rollout", fxcontroller.Provide(newController))

// conflictRetry is how long a reconcile waits to retry after its patch met a
// newer Deployment than its store held. The store catches up within
// milliseconds; the update itself may not enqueue the Deployment again, as
// the controller skips status-only updates.
const conflictRetry = time.Second

type params struct {
	fx.In

	Stores *fxstore.Registry
	Client client.Client
	Events fxcontroller.RecorderProvider
}

func newController(p params) (*fxcontroller.Controller, error) {
	deployments, err := fxstore.For[*appsv1.Deployment](p.Stores, fxstore.Spec{},
		fxstore.WithIndex(configMapIndex, indexConfigMaps),
		fxstore.WithIndex(secretIndex, indexSecrets))
	if err != nil {
		return nil, err
	}
	configMaps, err := fxstore.For[*corev1.ConfigMap](p.Stores, fxstore.Spec{})
	if err != nil {
		return nil, err
	}
	secrets, err := fxstore.For[*corev1.Secret](p.Stores, fxstore.Spec{})
	if err != nil {
		return nil, err
	}
	r := &reconciler{
		deployments: deployments,
		configMaps:  configMaps,
		secrets:     secrets,
		client:      p.Client,
		recorder:    p.Events.GetEventRecorder(controllerName),
	}
	return fxcontroller.New(controllerName, deployments, r,
		// Status updates change neither; the opt-in annotation is in the
		// metadata, which does not change the generation.
		fxcontroller.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})),
		fxcontroller.Watches(configMaps, enqueueReferencing(deployments, configMapIndex)),
		fxcontroller.Watches(secrets, enqueueReferencing(deployments, secretIndex)),
		fxcontroller.Writes(appsv1.Resource("deployments"), "patch"),
	)
}

// enqueueReferencing maps a ConfigMap or Secret to the opted-in Deployments
// that refer to it, found in the Deployment store's index.
func enqueueReferencing(deployments *fxstore.Store[*appsv1.Deployment], index string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		ds, err := deployments.ByIndex(index, obj.GetNamespace()+"/"+obj.GetName())
		if err != nil {
			// The lifecycle starts controllers once stores have synced, so
			// this is a bug, not a condition to retry.
			fxcontroller.LoggerFrom(ctx).Error("look up Deployments referring to a changed object", zap.Error(err))
			return nil
		}
		reqs := make([]reconcile.Request, len(ds))
		for i, d := range ds {
			reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(d)}
		}
		return reqs
	})
}

// optedIn reports whether d asks to be rolled out on configuration changes,
// and an error when its annotation is not a boolean.
func optedIn(d *appsv1.Deployment) (bool, error) {
	v, ok := d.Annotations[ReloadAnnotation]
	if !ok {
		return false, nil
	}
	reload, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("annotation %s: %q is not a boolean; set it to \"true\" to opt in", ReloadAnnotation, v)
	}
	return reload, nil
}

// reconciler keeps ConfigHashAnnotation on the pod template of each opted-in
// Deployment up to date.
type reconciler struct {
	deployments *fxstore.Store[*appsv1.Deployment]
	configMaps  *fxstore.Store[*corev1.ConfigMap]
	secrets     *fxstore.Store[*corev1.Secret]
	client      client.Client
	recorder    recorder.EventRecorder
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d, err := r.deployments.Get(req.Namespace, req.Name)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	log := fxcontroller.LoggerFrom(ctx)
	reload, err := optedIn(d)
	if err != nil {
		// Only a change to the Deployment can fix it, and that enqueues it.
		log.Warn("ignoring Deployment with an invalid annotation", zap.Error(err))
		r.recorder.Eventf(d, nil, corev1.EventTypeWarning, "InvalidAnnotation", "Ignore",
			"%v; the Deployment is not rolled out on configuration changes", err)
		return reconcile.Result{}, nil
	}
	if !reload {
		return reconcile.Result{}, nil
	}

	refs := referencesOf(&d.Spec.Template.Spec)
	hash, err := configHash(refs,
		func(name string) (*corev1.ConfigMap, error) { return r.configMaps.Get(d.Namespace, name) },
		func(name string) (*corev1.Secret, error) { return r.secrets.Get(d.Namespace, name) })
	if err != nil {
		return reconcile.Result{}, err
	}
	old := d.Spec.Template.Annotations[ConfigHashAnnotation]
	if old == hash {
		return reconcile.Result{}, nil
	}

	patched := d.DeepCopy() // the store's object is shared
	metav1.SetMetaDataAnnotation(&patched.Spec.Template.ObjectMeta, ConfigHashAnnotation, hash)
	// The lock makes the patch apply only to the Deployment the hash was
	// computed for: not to one that has since opted out.
	err = r.client.Patch(ctx, patched, client.MergeFromWithOptions(d, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	case apierrors.IsConflict(err):
		log.Debug("Deployment changed since read; retrying", zap.Error(err))
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("patch Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}

	log.Info("rolling out Deployment for its configuration",
		zap.String("hash", hash), zap.String("previousHash", old),
		zap.Strings("configMaps", refs.configMaps), zap.Strings("secrets", refs.secrets))
	if old == "" {
		r.recorder.Eventf(patched, nil, corev1.EventTypeNormal, "ConfigHashSet", "Rollout",
			"set %s to %s", ConfigHashAnnotation, short(hash))
	} else {
		r.recorder.Eventf(patched, nil, corev1.EventTypeNormal, "ConfigChanged", "Rollout",
			"referenced ConfigMaps or Secrets changed; %s %s -> %s", ConfigHashAnnotation, short(old), short(hash))
	}
	return reconcile.Result{}, nil
}

// short abbreviates a hash for messages, as git does.
func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
