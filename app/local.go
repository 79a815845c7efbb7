//go:build local

// The local command starts its control plane through controller-runtime's
// envtest, which is test code: only a binary built with -tags local, as
// `make run` builds one, has the command, and links envtest.

package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcluster/kubeconfig"
	"github.com/fxkube/fxkube/internal/controlplane"
)

func init() { taggedCommands = append(taggedCommands, (*app).localCommand) }

func (a *app) localCommand() *cobra.Command {
	var dir, kubeconfigOut string
	replicas, members := 1, 0
	var gates map[string]bool
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Start a local control plane and run the controllers against it until interrupted",
		Long: `Start a local kube-apiserver and etcd, write a kubeconfig for them, and run
the controllers against them until SIGINT or SIGTERM, then stop everything.
With --replicas N, N replicas of the app run, this process and N-1 others
started from its binary with "run": sharded controllers share their
buckets among them, and the others run on the leader. With --members N,
N more control planes start, each a member cluster of the app
(member-1 to member-N), as --cluster-kubeconfig would name them.

The binaries come from --controlplane-dir, which ` + "`make controlplane`" + ` fills.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := controlplane.Check(dir); err != nil {
				return err
			}
			// kube-apiserver and etcd run in process groups of their own
			// (envtest's), out of reach of a terminal's Ctrl-C: the app
			// must live to stop them. From here on, SIGINT and SIGTERM
			// cancel ctx rather than end the process; the app, once it
			// runs, stops on them too.
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
			if replicas < 1 {
				return fmt.Errorf("--replicas %d: run at least 1", replicas)
			}
			if members < 0 {
				return fmt.Errorf("--members %d: start 0 or more", members)
			}
			if replicas > 1 && !cmd.Flags().Changed("leader-elect") {
				lc.LeaderElection.Enabled = true
			}
			if kubeconfigOut == "" {
				tmp, err := os.MkdirTemp("", a.name+"-local-")
				if err != nil {
					return err
				}
				defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
				kubeconfigOut = filepath.Join(tmp, "kubeconfig")
			}
			cp, err := controlplane.Start(dir,
				controlplane.WithFeatureGates(map[string]bool{"ShardedListAndWatch": true}),
				controlplane.WithFeatureGates(gates))
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
			stopMembers, err := a.startMembers(cmd, dir, members, filepath.Dir(kubeconfigOut))
			defer func() { err = errors.Join(err, stopMembers()) }()
			if err != nil || ctx.Err() != nil {
				return err
			}
			// A replica that exits on its own stops this one too, and
			// the command fails naming it. One that exits on a
			// terminal's Ctrl-C finds ctx canceled already.
			ctx, exited := context.WithCancelCause(ctx)
			defer exited(nil)
			others, err := a.startReplicas(cmd, replicas-1, kubeconfigOut, exited)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, others.stop()) }()
			if err := a.run(ctx, cmd.ErrOrStderr(), cp.Config); err != nil {
				return err
			}
			if cause := context.Cause(ctx); errors.Is(cause, errReplicaExited) {
				return cause
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "controlplane-dir", controlplane.Dir(), "directory holding kube-apiserver, etcd and kubectl")
	cmd.Flags().StringVar(&kubeconfigOut, "kubeconfig-out", "", "where to write the kubeconfig (default: a file in a new temporary directory)")
	cmd.Flags().IntVar(&replicas, "replicas", 1, "how many replicas of the app to run (this process and others started from its binary)")
	cmd.Flags().IntVar(&members, "members", 0, "how many member clusters to start besides the app's own, each a local control plane of its own (member-1 to member-N)")
	cmd.Flags().Var(cliflag.NewMapStringBool(&gates), "feature-gates", "kube-apiserver's feature gates, as its --feature-gates flag takes them: A=true,B=false (ShardedListAndWatch is on unless turned off here)")
	return cmd
}

// startMembers starts n control planes, each a member cluster of the app
// (member-1 to member-n): their kubeconfigs go to dir, and the app
// engages them as --cluster-kubeconfig would. stop stops them.
func (a *app) startMembers(cmd *cobra.Command, controlPlanes string, n int, dir string) (stop func() error, err error) {
	cps := make([]*controlplane.Running, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range cps {
		wg.Go(func() { cps[i], errs[i] = controlplane.Start(controlPlanes) })
	}
	wg.Wait()
	stop = func() error {
		var errs []error
		for _, cp := range cps {
			if cp != nil {
				errs = append(errs, cp.Stop())
			}
		}
		return errors.Join(errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return stop, fmt.Errorf("start a member cluster's control plane: %w", err)
	}
	for i, cp := range cps {
		name := fxcluster.ClusterName(fmt.Sprintf("member-%d", i+1))
		path := filepath.Join(dir, string(name)+".kubeconfig")
		if err := os.WriteFile(path, cp.Kubeconfig, 0o600); err != nil {
			return stop, fmt.Errorf("write the kubeconfig of %s: %w", name, err)
		}
		a.flags.clusterFiles = append(a.flags.clusterFiles, kubeconfig.File{Name: name, Path: path})
		fmt.Fprintf(cmd.OutOrStdout(), "Member cluster %s is up. Its kubeconfig:\n\n  %s\n\n", name, path)
	}
	return stop, nil
}

// errReplicaExited is the cause of a stop that a replica's exit began.
var errReplicaExited = errors.New("a replica exited before it was stopped")

// replicaArgs returns the arguments of replica i: "run" against
// kubeconfig, with this process's flags for what replicas share (Leases,
// member clusters and how they are shared out, logging), probes on the
// i-th port after this process's, and metrics off.
func (a *app) replicaArgs(cmd *cobra.Command, i int, kubeconfig string) []string {
	lc, cs := a.flags.lifecycle, a.flags.clusterSecrets
	args := []string{"run", "--kubeconfig", kubeconfig, "--metrics-bind-address", "0",
		"--health-probe-bind-address", nthPort(lc.HealthProbeBindAddress, i),
		"--leader-elect=" + strconv.FormatBool(lc.LeaderElection.Enabled),
		"--leader-election-namespace", lc.LeaderElection.Namespace, "--leader-election-id", lc.LeaderElection.Name,
		"--shard-namespace", a.flags.shards.Namespace, "--shard-buckets", strconv.Itoa(a.flags.shards.Buckets),
		"--stop-timeout", lc.StopTimeout.String(),
		"--shard-clusters=" + strconv.FormatBool(a.flags.shardClusters),
		"--wait-for-clusters=" + strconv.FormatBool(a.flags.waitForClusters),
		"--cluster-secrets-namespace", cs.Namespace,
		"--cluster-secrets-allow-credential-plugins=" + strconv.FormatBool(cs.AllowCredentialPlugins),
		"--cluster-secrets-allow-local-files=" + strconv.FormatBool(cs.AllowLocalFiles)}
	for _, f := range a.flags.clusterFiles {
		args = append(args, "--cluster-kubeconfig", f.String())
	}
	// Logging as this process logs.
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if strings.HasPrefix(f.Name, "zap-") || f.Name == "log-level" || f.Name == "log-format" {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return args
}

// replicaProcesses are the replicas local starts besides itself.
type replicaProcesses struct {
	procs    []*exec.Cmd
	exits    []chan error // each replica's exit status, sent once
	stopping atomic.Bool  // set by stop: exits from then on are expected
}

// startReplicas starts n more replicas of the app from this binary, with
// replicaArgs. They print to the same output and, in this process's group, get the
// terminal's Ctrl-C too. A replica that exits before stop calls exited
// with an error naming it.
func (a *app) startReplicas(cmd *cobra.Command, n int, kubeconfig string, exited context.CancelCauseFunc) (*replicaProcesses, error) {
	if n == 0 {
		return nil, nil
	}
	procs := &replicaProcesses{}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary to start replicas: %w", err)
	}
	for i := 1; i <= n; i++ {
		p := exec.Command(self, a.replicaArgs(cmd, i, kubeconfig)...)
		p.Stdout, p.Stderr = cmd.ErrOrStderr(), cmd.ErrOrStderr()
		if err := p.Start(); err != nil {
			return nil, errors.Join(fmt.Errorf("start replica %d: %w", i, err), procs.stop())
		}
		exit := make(chan error, 1)
		procs.exits = append(procs.exits, exit)
		go func() {
			err := p.Wait()
			if !procs.stopping.Load() {
				status := "exit status 0"
				if err != nil {
					status = err.Error()
				}
				exited(fmt.Errorf("%w: replica %d (pid %d): %s; its output is above", errReplicaExited, i, p.Process.Pid, status))
				err = nil // reported
			}
			exit <- err
		}()
		procs.procs = append(procs.procs, p)
	}
	return procs, nil
}

// stop sends the replicas SIGTERM, unless a terminal's Ctrl-C reached them
// already, and waits for them to exit.
func (ps *replicaProcesses) stop() error {
	if ps == nil {
		return nil
	}
	ps.stopping.Store(true)
	for _, p := range ps.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	var errs []error
	for i, exit := range ps.exits {
		if err := <-exit; err != nil {
			errs = append(errs, fmt.Errorf("replica %d: %w", i+1, err))
		}
	}
	return errors.Join(errs...)
}

// nthPort returns addr with its port plus n ("0" stays "0").
func nthPort(addr string, n int) string {
	host, port, err := net.SplitHostPort(addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p == 0 {
		return addr
	}
	return net.JoinHostPort(host, strconv.Itoa(p+n))
}
