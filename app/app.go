package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/lifecycle"
)

// Main runs the command line of the app named name, made of modules, with
// os.Args, and returns the process's exit code.
func Main(name string, modules ...fx.Option) int {
	cmd := Command(name, modules...)
	if err := cmd.Execute(); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			return int(exit)
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "Error:", err)
		return 1
	}
	return 0
}

// exitError ends the process with a code after its cause was reported.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

// flags are the command line settings shared by the commands.
type flags struct {
	lifecycle lifecycle.Config
	logLevel  string
	logFormat string
}

// Command returns the app's root command: run (the default), describe, rbac
// and local.
func Command(name string, modules ...fx.Option) *cobra.Command {
	a := &app{name: name, modules: modules}
	root := &cobra.Command{
		Use:           name,
		Short:         name + " runs Kubernetes controllers on shared, synced stores",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return a.run(cmd.Context(), cmd.ErrOrStderr(), nil) },
	}
	a.registerFlags(root)
	root.AddCommand(
		&cobra.Command{
			Use:   "run",
			Short: "Run the controllers against the cluster of --kubeconfig (the default command)",
			Args:  cobra.NoArgs,
			RunE:  func(cmd *cobra.Command, _ []string) error { return a.run(cmd.Context(), cmd.ErrOrStderr(), nil) },
		},
		a.describeCommand(),
		a.rbacCommand(),
		a.localCommand(),
	)
	return root
}

// app is one binary: its name and modules, and the flags it was given.
type app struct {
	name    string
	modules []fx.Option
	flags   flags
}

func (a *app) registerFlags(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	// controller-runtime's config loader reads --kubeconfig from the Go
	// flag it registers; expose that one.
	if f := flag.CommandLine.Lookup(config.KubeconfigFlagName); f != nil {
		fs.AddGoFlag(f)
	}
	lc := &a.flags.lifecycle
	fs.StringVar(&lc.MetricsBindAddress, "metrics-bind-address", ":8080", `address the /metrics endpoint binds to; "0" disables it`)
	fs.StringVar(&lc.HealthProbeBindAddress, "health-probe-bind-address", ":8081", `address the /healthz and /readyz endpoints bind to; "0" disables them`)
	fs.DurationVar(&lc.SyncTimeout, "sync-timeout", 2*time.Minute, "how long start-up waits for every store's initial sync")
	fs.DurationVar(&lc.StopTimeout, "stop-timeout", 30*time.Second, "how long controllers get to finish in-flight reconciles on stop")
	fs.BoolVar(&lc.LeaderElection.Enabled, "leader-elect", false, "run controllers only on the replica holding the leader Lease")
	fs.StringVar(&lc.LeaderElection.Namespace, "leader-election-namespace", "default", "namespace of the leader Lease")
	fs.StringVar(&lc.LeaderElection.Name, "leader-election-id", a.name, "name of the leader Lease")
	fs.StringVar(&a.flags.logLevel, "log-level", "info", "lowest level logged: debug, info, warn or error")
	fs.StringVar(&a.flags.logFormat, "log-format", "json", "log format: json or console")
}

func (a *app) logger() (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(a.flags.logLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	log, err := lifecycle.NewLogger(lifecycle.LogOptions{Level: level, Format: a.flags.logFormat})
	if err != nil {
		return nil, err
	}
	lifecycle.RedirectLogs(log)
	return log.Named(a.name), nil
}

// graph is every fx option of the app but the lifecycle: the modules and
// what they are given.
func (a *app) graph(cfg *rest.Config, log *zap.Logger) fx.Option {
	return fx.Options(
		fx.Supply(cfg, log),
		fxstore.Module,
		fxcontroller.Module,
		fx.Options(a.modules...),
	)
}

// run runs the app against the cluster of cfg, or of --kubeconfig when cfg
// is nil, until SIGINT or SIGTERM. A failed start is logged and returned as
// exit code 1.
func (a *app) run(ctx context.Context, stderr io.Writer, cfg *rest.Config) error {
	log, err := a.logger()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	if cfg == nil {
		if cfg, err = config.GetConfig(); err != nil {
			return fmt.Errorf("load kubeconfig: %w; pass --kubeconfig, or run in a cluster", err)
		}
	}
	fxApp := fx.New(a.graph(cfg, log), lifecycle.Options(a.flags.lifecycle))
	if err := fxApp.Err(); err != nil {
		return fmt.Errorf("build the app: %w", err)
	}
	if err := fxApp.Start(ctx); err != nil {
		log.Error("start failed", zap.Error(err))
		fmt.Fprintf(stderr, "%s: start failed: %v\n", a.name, err)
		return exitError(1)
	}
	sig := <-fxApp.Wait()
	log.Info("stopping", zap.Stringer("signal", sig.Signal), zap.Int("exitCode", sig.ExitCode))
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fxApp.StopTimeout())
	defer cancel()
	if err := fxApp.Stop(stopCtx); err != nil {
		log.Error("stop failed", zap.Error(err))
		return exitError(1)
	}
	if sig.ExitCode != 0 {
		return exitError(sig.ExitCode)
	}
	return nil
}
