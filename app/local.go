package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fxkube/fxkube/internal/controlplane"
)

func (a *app) localCommand() *cobra.Command {
	var dir, kubeconfigOut string
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
			// A local control plane is for this machine only; so are the
			// app's endpoints, unless asked otherwise.
			lc := &a.flags.lifecycle
			if !cmd.Flags().Changed("metrics-bind-address") {
				lc.MetricsBindAddress = "127.0.0.1:8080"
			}
			if !cmd.Flags().Changed("health-probe-bind-address") {
				lc.HealthProbeBindAddress = "127.0.0.1:8081"
			}
			if kubeconfigOut == "" {
				tmp, err := os.MkdirTemp("", a.name+"-local-")
				if err != nil {
					return err
				}
				defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
				kubeconfigOut = filepath.Join(tmp, "kubeconfig")
			}
			cp, err := controlplane.Start(dir)
			if err != nil {
				return fmt.Errorf("start the local control plane: %w", err)
			}
			defer func() { err = errors.Join(err, cp.Stop()) }()
			if err := os.WriteFile(kubeconfigOut, cp.Kubeconfig, 0o600); err != nil {
				return fmt.Errorf("write kubeconfig: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Local control plane %s is up. Its kubeconfig:\n\n  export KUBECONFIG=%s\n\n",
				controlplane.KubernetesVersion, kubeconfigOut)
			return a.run(cmd.Context(), cmd.ErrOrStderr(), cp.Config)
		},
	}
	cmd.Flags().StringVar(&dir, "controlplane-dir", controlplane.Dir(), "directory holding kube-apiserver, etcd and kubectl")
	cmd.Flags().StringVar(&kubeconfigOut, "kubeconfig-out", "", "where to write the kubeconfig (default: a file in a new temporary directory)")
	return cmd
}
