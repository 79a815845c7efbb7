package fxcontroller_test

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
)

// Every option prints as the call that made it, as fx's options do. The
// options of both New and SetupWithManager are both (a compile-time fact:
// each is passed to both below).
func TestOptionsPrintTheirCall(t *testing.T) {
	both := []interface {
		fxcontroller.Option
		fxcontroller.HostedOption
	}{
		fxcontroller.WithMaxConcurrentReconciles(4),
		fxcontroller.WithLeaderElection(false),
		fxcontroller.WithLogger(zap.NewNop().Named("ops")),
		fxcontroller.Writes(corev1.Resource("configmaps"), "update", "patch"),
	}
	tests := []struct {
		give fmt.Stringer
		want string
	}{
		{both[0], "fxcontroller.WithMaxConcurrentReconciles(4)"},
		{both[1], "fxcontroller.WithLeaderElection(false)"},
		{both[2], `fxcontroller.WithLogger(logger "ops")`},
		{both[3], `fxcontroller.Writes("configmaps", ["update" "patch"])`},
		{fxcontroller.WithPredicates(predicate.GenerationChangedPredicate{}), "fxcontroller.WithPredicates(predicate.TypedGenerationChangedPredicate)"},
		{fxcontroller.WithRateLimiter(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()), "fxcontroller.WithRateLimiter(*workqueue.TypedMaxOfRateLimiter)"},
		{fxcontroller.WithName("ops"), `fxcontroller.WithName("ops")`},
		{fxcontroller.WithControllerPrefix("ops"), `fxcontroller.WithControllerPrefix("ops")`},
		{fxcontroller.WithCacheOptions(crcache.Options{}), "fxcontroller.WithCacheOptions(cache.Options{...})"},
		{fxcontroller.WithClientOptions(client.Options{}), "fxcontroller.WithClientOptions(client.Options{...})"},
		{fxcontroller.WithLogr(funcr.New(func(string, string) {}, funcr.Options{})), "fxcontroller.WithLogr(*funcr.fnlogger)"},
		{fxcontroller.WithLogr(logr.Logger{}), "fxcontroller.WithLogr(logr.Logger{})"},
		{fxcontroller.WithManagerOptions(manager.Options{}), "fxcontroller.WithManagerOptions(manager.Options{...})"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.give.String())
	}
	_ = []fxcontroller.Option{both[0], both[1], both[2], both[3]}
	_ = []fxcontroller.HostedOption{both[0], both[1], both[2], both[3]}
}
