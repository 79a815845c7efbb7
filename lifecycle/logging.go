package lifecycle

import (
	"fmt"
	"sync"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// LogOptions configures the app's logger.
type LogOptions struct {
	// Level is the lowest level logged. Defaults to info.
	Level zapcore.Level
	// Format is "json" or "console". Defaults to "json".
	Format string
}

// NewLogger returns a zap logger writing to stderr as opts say.
func NewLogger(opts LogOptions) (*zap.Logger, error) {
	var cfg zap.Config
	switch opts.Format {
	case "", "json":
		cfg = zap.NewProductionConfig()
	case "console":
		cfg = zap.NewDevelopmentConfig()
	default:
		return nil, fmt.Errorf("unknown log format %q; use json or console", opts.Format)
	}
	cfg.Level = zap.NewAtomicLevelAt(opts.Level)
	cfg.Sampling = nil
	return cfg.Build()
}

var redirectOnce sync.Once

// RedirectLogs routes controller-runtime's logr, client-go's klog and the
// standard library's log output (net/http servers' TLS handshake errors,
// for one) through log, so every line the process prints is zap's. It affects the
// whole process, so only its first call has an effect.
func RedirectLogs(log *zap.Logger) {
	redirectOnce.Do(func() {
		// Unnamed, as a kubebuilder binary sets it: controller-runtime
		// names its own loggers ("controller-runtime.metrics") and a
		// project's ("setup"); a name here doubled theirs.
		ctrllog.SetLogger(zapr.NewLogger(log))
		klog.SetLoggerWithOptions(zapr.NewLogger(log.Named("client-go")), klog.ContextualLogger(true))
		zap.RedirectStdLog(log.Named("stdlog"))
	})
}
