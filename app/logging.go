package app

import (
	"fmt"
	"sync"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// buildLogger returns a zap logger writing to stderr from level up, in
// format: "json" (the default) or "console".
func buildLogger(level zapcore.Level, format string) (*zap.Logger, error) {
	var cfg zap.Config
	switch format {
	case "", "json":
		cfg = zap.NewProductionConfig()
	case "console":
		cfg = zap.NewDevelopmentConfig()
	default:
		return nil, fmt.Errorf("unknown log format %q; use json or console", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(level)
	cfg.Sampling = nil
	return cfg.Build()
}

var redirectOnce sync.Once

// redirectLogs routes controller-runtime's logr, client-go's klog and the
// standard library's log output (net/http servers' TLS handshake errors,
// for one) through log, so every line the process prints is zap's. It
// affects the whole process, so only its first call has an effect.
func redirectLogs(log *zap.Logger) {
	redirectOnce.Do(func() {
		// Unnamed, as a kubebuilder binary sets it: controller-runtime
		// names its own loggers ("controller-runtime.metrics") and a
		// project's ("setup"); a name here doubled theirs.
		ctrllog.SetLogger(zapr.NewLogger(log))
		klog.SetLoggerWithOptions(zapr.NewLogger(log.Named("client-go")), klog.ContextualLogger(true))
		zap.RedirectStdLog(log.Named("stdlog"))
	})
}
