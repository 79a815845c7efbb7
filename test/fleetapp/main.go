// Command fleetapp is an app of one controller across member clusters,
// for the tests that run it as a process: each reconcile of a member's
// ConfigMap in namespace "shared" is logged as "reconciled", with the
// member's name and when it began.
package main

import (
	"context"
	"os"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxstore"
)

var recorder = fx.Module("recorder", fxcluster.Provide(func(f *fxcluster.Fleet, log *zap.Logger) (*fxcluster.Controller, error) {
	configMaps, err := fxcluster.For[*corev1.ConfigMap](f, fxstore.Spec{Namespace: "shared"})
	if err != nil {
		return nil, err
	}
	return fxcluster.NewController("recorder", configMaps, fxcluster.Func(func(_ context.Context, req fxcluster.Request) (reconcile.Result, error) {
		began := time.Now()
		time.Sleep(20 * time.Millisecond) // a reconcile takes time
		log.Info("reconciled", zap.String("cluster", string(req.ClusterName)), zap.String("name", req.Name),
			zap.Float64("began", float64(began.UnixNano())/1e9))
		return reconcile.Result{}, nil
	}))
}))

func main() { os.Exit(app.Main("fleetapp", recorder)) }
