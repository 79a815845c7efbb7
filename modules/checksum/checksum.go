package checksum

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/datahash"
)

const (
	// Label opts a ConfigMap in when "true".
	Label = "fxkube.io/checksum"
	// Annotation holds the checksum of the data: "sha256:" and 64 hex
	// digits.
	Annotation = "fxkube.io/checksum"
	// ByAnnotation names the replica that wrote Annotation.
	ByAnnotation = "fxkube.io/checksum-by"
)

// Controller names the module's controller in logs and metrics.
const Controller = "checksum"

// Module stamps ConfigMaps; see the package documentation. It needs
// fxstore.Module, fxcontroller.Module and fxshard.Module.
var Module = fx.Module("checksum", fxcontroller.Provide(newController))

type params struct {
	fx.In

	Shards *fxshard.Shards
	Client client.Client
}

func newController(p params) (*fxcontroller.Controller, error) {
	configMaps, err := fxshard.For[*corev1.ConfigMap](p.Shards, fxstore.Spec{LabelSelector: Label + "=true"}, fxstore.ShardByUID)
	if err != nil {
		return nil, err
	}
	r := &reconciler{configMaps: configMaps, client: p.Client, shards: p.Shards}
	return fxcontroller.New(Controller, configMaps, r,
		fxcontroller.Writes(corev1.Resource("configmaps"), "patch"))
}

type reconciler struct {
	configMaps *fxshard.Store[*corev1.ConfigMap]
	client     client.Client
	shards     *fxshard.Shards
}

// Sum returns the checksum Annotation holds for cm's data.
func Sum(cm *corev1.ConfigMap) string {
	w := datahash.New()
	datahash.ConfigMap(w, cm)
	return "sha256:" + w.Sum()
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	began := time.Now()
	cm, err := r.configMaps.Get(req.Namespace, req.Name)
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	sum := Sum(cm)
	if cm.Annotations[Annotation] == sum {
		return reconcile.Result{}, nil
	}
	identity := r.shards.Coordinator().Identity()
	// A merge patch with the resourceVersion read: a change made since
	// is reconciled again rather than stamped with a stale sum.
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"annotations":{%q:%q,%q:%q}}}`,
		cm.ResourceVersion, Annotation, sum, ByAnnotation, identity)
	if err := r.client.Patch(ctx, cm.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return reconcile.Result{}, fmt.Errorf("stamp ConfigMap %s: %w", req, err)
	}
	fxcontroller.LoggerFrom(ctx).Info("checksum written", zap.Stringer("configMap", req.NamespacedName),
		zap.String("resourceVersion", cm.ResourceVersion), zap.Time("began", began))
	return reconcile.Result{}, nil
}
