package fxcontroller

import (
	"github.com/go-logr/zapr"
	"go.uber.org/fx"
	"go.uber.org/zap"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/internal/recorders"
)

// RecorderProvider gives each controller its event recorder. It is
// controller-runtime's recorder.Provider without the deprecated core/v1
// recorder, so a controller-runtime manager is one too. Module provides one
// that sends events.k8s.io/v1 Events to the API server; fxcontrollertest
// provides one that keeps them in memory.
type RecorderProvider interface {
	// GetEventRecorder returns a recorder whose Events name name as their
	// reporting controller; pass the controller's name.
	GetEventRecorder(name string) recorder.EventRecorder
}

type recorderParams struct {
	fx.In

	Lifecycle fx.Lifecycle
	Conn      *connection.Connection
	Scheme    *k8sruntime.Scheme
	Logger    *zap.Logger `optional:"true"`
}

func newRecorderProvider(p recorderParams) (RecorderProvider, error) {
	log := zap.NewNop()
	if p.Logger != nil {
		log = p.Logger.Named("events")
	}
	b, err := recorders.New(p.Conn, p.Scheme, zapr.NewLogger(log))
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.StartStopHook(b.Start, b.Stop))
	return b, nil
}
