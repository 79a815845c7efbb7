//go:build local

// The local command starts its control plane through controller-runtime's
// envtest, which is test code: only a binary built with -tags local, as
// `make run` builds one, has the command, and links envtest.

package app

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fxkube/fxkube/internal/controlplane"
)

func init() { taggedCommands = append(taggedCommands, (*app).localCommand) }

// featureGates is the --feature-gates flag: gates named set, others keep
// what they held.
type featureGates map[string]bool

func (g featureGates) String() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(g)) {
		parts = append(parts, name+"="+strconv.FormatBool(g[name]))
	}
	return strings.Join(parts, ",")
}

func (g featureGates) Set(value string) error {
	for part := range strings.SplitSeq(value, ",") {
		name, on, ok := strings.Cut(strings.TrimSpace(part), "=")
		enabled, err := strconv.ParseBool(on)
		if !ok || name == "" || err != nil {
			return fmt.Errorf("%q is not a gate's name, =, and true or false, as in ShardedListAndWatch=true", part)
		}
		g[name] = enabled
	}
	return nil
}

func (g featureGates) Type() string { return "gates" }

func (a *app) localCommand() *cobra.Command {
	var dir, kubeconfigOut string
	gates := map[string]bool{"ShardedListAndWatch": true}
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Start a local control plane and run the controllers against it until interrupted",
		Long: `Start a local kube-apiserver and etcd, write a kubeconfig for them, and run
the controllers against them until SIGINT or SIGTERM, then stop everything.

The binaries come from --controlplane-dir, which ` + "`make controlplane`" + ` fills.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := controlplane.Check(dir); err != nil {
				return err
			}
			// kube-apiserver and etcd run in process groups of their own
			// (envtest's), out of reach of a terminal's Ctrl-C: the app
			// must live to stop them. From here on, SIGINT and SIGTERM
			// cancel ctx rather than end the process, before the app's
			// own handler (fx's, from when it has started) takes over.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// A local control plane is for this machine only; so are the
			// app's endpoints, in plain HTTP, unless asked otherwise. No
			// pod names the Lease's namespace: use "default".
			lc := &a.flags.lifecycle
			if !cmd.Flags().Changed("metrics-bind-address") {
				lc.MetricsBindAddress = "127.0.0.1:8080"
			}
			if !cmd.Flags().Changed("metrics-secure") {
				lc.MetricsSecure = false
			}
			if !cmd.Flags().Changed("health-probe-bind-address") {
				lc.HealthProbeBindAddress = "127.0.0.1:8081"
			}
			if !cmd.Flags().Changed("leader-election-namespace") {
				lc.LeaderElection.Namespace = "default"
			}
			if !cmd.Flags().Changed("shard-namespace") {
				a.flags.shards.Namespace = "default"
			}
			if kubeconfigOut == "" {
				tmp, err := os.MkdirTemp("", a.name+"-local-")
				if err != nil {
					return err
				}
				defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
				kubeconfigOut = filepath.Join(tmp, "kubeconfig")
			}
			cp, err := controlplane.Start(dir, controlplane.WithFeatureGates(gates))
			if err != nil {
				return fmt.Errorf("start the local control plane: %w", err)
			}
			defer func() { err = errors.Join(err, cp.Stop()) }()
			if ctx.Err() != nil {
				return nil // interrupted while the control plane started
			}
			if err := os.WriteFile(kubeconfigOut, cp.Kubeconfig, 0o600); err != nil {
				return fmt.Errorf("write kubeconfig: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Local control plane %s is up. Its kubeconfig:\n\n  export KUBECONFIG=%s\n\n",
				controlplane.KubernetesVersion, kubeconfigOut)
			return a.run(ctx, cmd.ErrOrStderr(), cp.Config)
		},
	}
	cmd.Flags().StringVar(&dir, "controlplane-dir", controlplane.Dir(), "directory holding kube-apiserver, etcd and kubectl")
	cmd.Flags().StringVar(&kubeconfigOut, "kubeconfig-out", "", "where to write the kubeconfig (default: a file in a new temporary directory)")
	cmd.Flags().Var(featureGates(gates), "feature-gates", "kube-apiserver's feature gates, as its --feature-gates flag takes them: A=true,B=false (ShardedListAndWatch is on unless turned off here)")
	return cmd
}
