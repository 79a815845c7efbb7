package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcluster/kubeconfig"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/builderr"
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
	shards    fxshard.Config
	// controllers is --controllers, in kube-controller-manager's syntax.
	controllers []string
	// clusterFiles are --cluster-kubeconfig's member clusters, and
	// waitForClusters whether the start waits for them.
	clusterFiles    kubeconfig.Files
	waitForClusters bool
	// shardClusters shares the member clusters out among replicas.
	shardClusters bool
	// clusterSecrets configures the provider of kubeconfig Secrets, which
	// runs when its Namespace is set.
	clusterSecrets kubeconfig.SecretOptions
	logLevel       string
	logFormat      string
	// zap is what controller-runtime's --zap-* flags set, starting from
	// kubebuilder's zap.Options{Development: true}; zapNames are their
	// names.
	zap      crzap.Options
	zapNames []string
	// changed reports whether the flag of that name was given.
	changed func(name string) bool
}

// Command returns the app's root command: run (the default), describe and
// rbac, and local in a binary built with -tags local.
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
	)
	for _, command := range taggedCommands {
		root.AddCommand(command(a))
	}
	return root
}

// taggedCommands make the commands that only some builds have: local.go,
// built with -tags local, adds the local command from an init, so that a
// production binary links none of the test code (envtest) it needs.
var taggedCommands []func(*app) *cobra.Command

// app is one binary: its name and modules, and the flags it was given.
type app struct {
	name    string
	modules []fx.Option
	flags   flags
}

// registerFlags registers the flags of the commands that run the app. Every
// flag of a kubebuilder project's cmd/main.go that means something here has
// its name and default, so the project's manifests run the app unchanged.
func (a *app) registerFlags(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	// controller-runtime's config loader reads --kubeconfig from the Go
	// flag it registers; expose that one.
	if f := flag.CommandLine.Lookup(config.KubeconfigFlagName); f != nil {
		fs.AddGoFlag(f)
	}
	lc := &a.flags.lifecycle
	fs.StringVar(&lc.MetricsBindAddress, "metrics-bind-address", "0", `address the /metrics endpoint binds to: :8443 for HTTPS or :8080 for HTTP; "0" disables it`)
	fs.BoolVar(&lc.MetricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to callers the API server authenticates and authorizes; --metrics-secure=false serves plain HTTP")
	fs.StringVar(&lc.MetricsCert.Path, "metrics-cert-path", "", "directory holding the metrics server's certificate (default: a self-signed one)")
	fs.StringVar(&lc.MetricsCert.Name, "metrics-cert-name", "tls.crt", "file name of the metrics server's certificate")
	fs.StringVar(&lc.MetricsCert.Key, "metrics-cert-key", "tls.key", "file name of the metrics server's key")
	fs.IntVar(&lc.Webhook.Port, "webhook-port", 9443, "port the webhook server serves at")
	fs.StringVar(&lc.Webhook.Cert.Path, "webhook-cert-path", "", "directory holding the webhook server's certificate (default: <temp dir>/k8s-webhook-server/serving-certs)")
	fs.StringVar(&lc.Webhook.Cert.Name, "webhook-cert-name", "tls.crt", "file name of the webhook server's certificate")
	fs.StringVar(&lc.Webhook.Cert.Key, "webhook-cert-key", "tls.key", "file name of the webhook server's key")
	fs.BoolVar(&lc.EnableHTTP2, "enable-http2", false, "let the metrics and webhook servers speak HTTP/2 (off for the HTTP/2 Stream Cancellation and Rapid Reset CVEs)")
	fs.StringVar(&lc.TLS.MinVersion, "tls-min-version", "", "lowest TLS version the metrics and webhook servers accept, as kube-apiserver's flag: "+strings.Join(cliflag.TLSPossibleVersions(), ", ")+" (default: Go's, VersionTLS12)")
	fs.StringSliceVar(&lc.TLS.CipherSuites, "tls-cipher-suites", nil, "comma-separated cipher suites the metrics and webhook servers offer up to TLS 1.2, as kube-apiserver's flag (default: Go's). Preferred: "+
		strings.Join(cliflag.PreferredTLSCipherNames(), ", ")+". Insecure: "+strings.Join(cliflag.InsecureTLSCipherNames(), ", "))
	fs.StringVar(&lc.PprofBindAddress, "pprof-bind-address", "0", `address net/http/pprof's /debug/pprof/ endpoints bind to; "0" disables them`)
	fs.StringVar(&lc.HealthProbeBindAddress, "health-probe-bind-address", ":8081", `address the /healthz and /readyz endpoints bind to; "0" disables them`)
	fs.DurationVar(&lc.SyncTimeout, "sync-timeout", 2*time.Minute, "how long start-up waits for every store's initial sync")
	fs.DurationVar(&lc.StoreFailureTimeout, "store-failure-timeout", 5*time.Minute, `how long a store's list/watch may fail after start before /readyz's "stores" check fails; negative: never`)
	fs.DurationVar(&lc.StopTimeout, "stop-timeout", 30*time.Second, "how long controllers get to finish in-flight reconciles on stop")
	fs.BoolVar(&lc.LeaderElection.Enabled, "leader-elect", false, "run controllers only on the replica holding the leader Lease")
	fs.StringVar(&lc.LeaderElection.Namespace, "leader-election-namespace", "", "namespace of the leader Lease (default: the pod's namespace in a cluster, else the kubeconfig context's)")
	fs.StringVar(&lc.LeaderElection.Name, "leader-election-id", a.name, "name of the leader Lease")
	fs.StringSliceVar(&a.flags.controllers, "controllers", []string{"*"}, `controllers and hosted operators to run, as kube-controller-manager's flag: "*" runs all, "name" runs that one, "-name" leaves it out, such as "*,-mirror"`)
	fs.Var(&a.flags.clusterFiles, "cluster-kubeconfig", "a member cluster, as NAME=PATH[@CONTEXT]: the context (default: the current one) of a kubeconfig file; repeat it for more")
	fs.BoolVar(&a.flags.shardClusters, "shard-clusters", false, "share the member clusters out among the app's replicas through Leases (see --shard-namespace): each runs the controllers of its members only, leader or not")
	fs.BoolVar(&a.flags.waitForClusters, "wait-for-clusters", false, "make the start wait for the members of --cluster-kubeconfig to join, and fail if one cannot (default: no member holds back the start)")
	fs.StringVar(&a.flags.clusterSecrets.Namespace, "cluster-secrets-namespace", "", "namespace of kubeconfig Secrets naming member clusters, labelled "+kubeconfig.DefaultSecretLabel+"=true as multicluster-runtime's provider reads them (default: none)")
	fs.BoolVar(&a.flags.clusterSecrets.AllowCredentialPlugins, "cluster-secrets-allow-credential-plugins", false, "let a kubeconfig Secret name an exec credential plugin or an auth-provider, which the app then runs")
	fs.BoolVar(&a.flags.clusterSecrets.AllowLocalFiles, "cluster-secrets-allow-local-files", false, "let a kubeconfig Secret name files of the app's own, which the app then reads and sends")
	fs.IntVar(&a.flags.shards.Buckets, "shard-buckets", fxshard.DefaultBuckets, "buckets the keys of sharded controllers are hashed into, each owned by one replica at a time through a Lease; every replica must use the same")
	fs.StringVar(&a.flags.shards.Namespace, "shard-namespace", "", "namespace of the sharding Leases (default: the pod's namespace in a cluster, else the kubeconfig context's)")
	fs.StringVar(&a.flags.logLevel, "log-level", "info", "lowest level logged: debug, info, warn or error (or use the --zap-* flags instead)")
	fs.StringVar(&a.flags.logFormat, "log-format", "json", "log format: json or console (or use the --zap-* flags instead)")
	// The --zap-* flags are controller-runtime's own, bound as kubebuilder's
	// cmd/main.go binds them, so they mean there what they mean here.
	a.flags.zap = crzap.Options{Development: true}
	zapFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	a.flags.zap.BindFlags(zapFlags)
	zapFlags.VisitAll(func(f *flag.Flag) { a.flags.zapNames = append(a.flags.zapNames, f.Name) })
	fs.AddGoFlagSet(zapFlags)
	fs.Lookup("zap-devel").Usage += "; the --zap-* flags apply when one is given, in place of --log-level and --log-format"
	a.flags.changed = fs.Changed
}

// logger builds the app's logger as the flags say and routes
// controller-runtime's and client-go's logs through it.
func (a *app) logger() (*zap.Logger, error) {
	log, err := a.newLogger()
	if err != nil {
		return nil, err
	}
	redirectLogs(log)
	return log.Named(a.name), nil
}

// newLogger returns controller-runtime's logger when a --zap-* flag was
// given, as a kubebuilder cmd/main.go builds it, and fxkube's otherwise.
func (a *app) newLogger() (*zap.Logger, error) {
	if zapFlag := a.firstChanged(a.flags.zapNames...); zapFlag != "" {
		if logFlag := a.firstChanged("log-level", "log-format"); logFlag != "" {
			return nil, fmt.Errorf("--%s and --%s both configure the logger; use either the --zap-* flags or --log-level and --log-format", zapFlag, logFlag)
		}
		return crzap.NewRaw(crzap.UseFlagOptions(&a.flags.zap)), nil
	}
	level, err := zapcore.ParseLevel(a.flags.logLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return buildLogger(level, a.flags.logFormat)
}

// firstChanged returns the first of names that was given, or "".
func (a *app) firstChanged(names ...string) string {
	for _, name := range names {
		if a.flags.changed(name) {
			return name
		}
	}
	return ""
}

// graph is every fx option of the app but the lifecycle: the modules and
// what they are given.
func (a *app) graph(cfg *rest.Config, log *zap.Logger) fx.Option {
	shards := a.flags.shards
	shards.Name = a.name
	selection, err := fxcontroller.Select(a.flags.controllers...)
	if err != nil {
		return fx.Error(err)
	}
	return fx.Options(
		fx.Supply(cfg, log, selection),
		fxstore.Module,
		fxcontroller.Module,
		// Always there, so that a module of controllers across clusters
		// works in any app; without providers it runs nothing.
		fxcluster.Module,
		a.clusterProviders(),
		fxshard.Options(shards),
		fx.Options(a.modules...),
	)
}

// clusterProviders are the providers of member clusters the flags name.
func (a *app) clusterProviders() fx.Option {
	opts := []fx.Option{kubeconfig.ProvideFiles(kubeconfig.FileOptions{Files: a.flags.clusterFiles})}
	var fleet fxcluster.Options
	if a.flags.waitForClusters {
		for _, f := range a.flags.clusterFiles {
			fleet.WaitFor = append(fleet.WaitFor, f.Name)
		}
	}
	if a.flags.shardClusters {
		fleet.Share = &fxshard.Config{
			Name:      a.name + "-clusters",
			Namespace: a.flags.shards.Namespace,
			Buckets:   a.flags.shards.Buckets,
		}
	}
	if fleet.WaitFor != nil || fleet.Share != nil {
		opts = append(opts, fx.Supply(fleet))
	}
	if a.flags.clusterSecrets.Namespace != "" {
		opts = append(opts, kubeconfig.ProvideSecrets(a.flags.clusterSecrets))
	}
	return fx.Options(opts...)
}

// loadConfig loads the config of the cluster of --kubeconfig, or of the
// one the process runs in.
func loadConfig() (*rest.Config, error) {
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w; pass --kubeconfig, or run in a cluster", err)
	}
	return cfg, nil
}

// run runs the app against the cluster of cfg, or of --kubeconfig when cfg
// is nil, until SIGINT or SIGTERM, or until ctx ends. A failed start is
// logged and returned as exit code 1.
func (a *app) run(ctx context.Context, stderr io.Writer, cfg *rest.Config) error {
	log, err := a.logger()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	setMemoryLimit(log, memlimit.FromCgroup)
	a.defaultLeaseNamespaces(log, cfg == nil)
	if cfg == nil {
		if cfg, err = loadConfig(); err != nil {
			return err
		}
	}
	// Until the app has started (stores may take minutes to sync),
	// SIGINT and SIGTERM, or ctx's end (local ends it on a signal), cut
	// the start short: it fails and rolls back, and the process stops
	// cleanly. fx's Start is not given a context that ends, which it does
	// not handle well (see lifecycle.Interrupt). fx relays the signals
	// from the first Wait on: asked for before Start, it misses none that
	// comes too late to cut the start short, and the app stops once
	// started.
	interrupt, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	fxApp := fx.New(a.graph(cfg, log),
		fx.Supply(lifecycle.Interrupt(interrupt.Done())),
		lifecycle.Options(a.flags.lifecycle))
	if err := fxApp.Err(); err != nil {
		return fmt.Errorf("build the app: %w", builderr.Readable(err))
	}
	shutdown := fxApp.Wait()
	started := make(chan error, 1)
	go func() { started <- fxApp.Start(context.WithoutCancel(ctx)) }()
	select {
	case err = <-started:
	case <-interrupt.Done():
		// Cut short, the start ends as a stop does: within the stop
		// timeout.
		select {
		case err = <-started:
		case <-time.After(fxApp.StopTimeout()):
			log.Error("interrupted while starting, and the start did not end within the stop timeout", zap.Duration("stopTimeout", fxApp.StopTimeout()))
			return exitError(1)
		}
	}
	cause := context.Cause(interrupt) // nil unless interrupted
	stopSignals()
	if err != nil {
		// Start has rolled back; Stop ends fx's relay of signals.
		if err := a.stop(ctx, fxApp); err != nil {
			log.Error("stop failed", zap.Error(err))
			return exitError(1)
		}
		if cause != nil {
			log.Info("interrupted while starting; stopped", zap.NamedError("cause", cause), zap.NamedError("startError", err))
			return nil
		}
		log.Error("start failed", zap.Error(err))
		fmt.Fprintf(stderr, "%s: start failed: %v\n", a.name, err)
		return exitError(1)
	}
	// A signal too late to cut the start short is in shutdown too, unless
	// it came before fx's relay started: then it stops the app now.
	late := make(chan struct{})
	if cause != nil {
		close(late)
	}
	exitCode := 0
	select {
	case sig := <-shutdown:
		log.Info("stopping", zap.Stringer("signal", sig.Signal), zap.Int("exitCode", sig.ExitCode))
		exitCode = sig.ExitCode
	case <-ctx.Done():
		log.Info("stopping", zap.NamedError("cause", context.Cause(ctx)))
	case <-late:
		log.Info("stopping", zap.NamedError("cause", cause))
	}
	if err := a.stop(ctx, fxApp); err != nil {
		log.Error("stop failed", zap.Error(err))
		return exitError(1)
	}
	if exitCode != 0 {
		return exitError(exitCode)
	}
	return nil
}

// stop stops fxApp within its stop timeout, even once ctx has ended.
func (a *app) stop(ctx context.Context, fxApp *fx.App) error {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fxApp.StopTimeout())
	defer cancel()
	return fxApp.Stop(stopCtx)
}
