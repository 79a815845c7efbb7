package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/fxkube/fxkube/internal/grace"
	"github.com/fxkube/fxkube/internal/podnamespace"
)

// elect campaigns for the Lease in the background. Runnables that need
// leadership start when this replica leads. Losing the lease stops the app
// with exit code 1, so Kubernetes restarts it as a warm standby; a clean stop
// releases the lease so another replica takes over at once.
func (r *runner) elect() error {
	le := r.cfg.LeaderElection
	conn, err := r.connect()
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	id := le.Identity
	if id == "" {
		host, _ := os.Hostname()
		id = host + "_" + string(uuid.NewUUID())
	}
	kube, err := kubernetes.NewForConfigAndClient(conn.Config, conn.HTTPClient)
	if err != nil {
		return fmt.Errorf("leader election client: %w", err)
	}
	log := r.log.With(zap.String("lease", le.Namespace+"/"+le.Name), zap.String("identity", id))
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				log.Info("became leader; starting runnables")
				// Runnables stop when leadership ends or the app stops.
				// Work in flight when the app stops runs on until the stop
				// bound, as without leader election, but not once another
				// replica may lead.
				until, endUntil := context.WithCancel(leading)
				context.AfterFunc(r.graceCtx, endUntil)
				ctx, cancel := context.WithCancel(grace.With(leading, until))
				context.AfterFunc(r.runCtx, cancel)
				if r.startRunnables(ctx, true) {
					r.state.Store(ready)
				}
			},
			OnStoppedLeading: func() {
				r.mu.Lock()
				stopping := r.stopping
				r.mu.Unlock()
				if stopping {
					log.Info("released leadership")
					return
				}
				log.Error("lost leadership; exiting so that Kubernetes restarts this replica")
				r.shutdown(errors.New("lost leadership"))
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stopElection = cancel
	r.electionDone = make(chan struct{})
	go func() {
		defer close(r.electionDone)
		elector.Run(ctx)
	}()
	log.Info("campaigning for leadership")
	return nil
}

// resolveLease checks the Lease's name and defaults its namespace, before
// the app does any work, so that a missing setting fails start at once.
func (r *runner) resolveLease() error {
	le := &r.cfg.LeaderElection
	if le.Name == "" {
		return errors.New("leader election needs a lease name; set --leader-election-id")
	}
	ns, err := podnamespace.Default(le.Namespace, podnamespace.Path, "leader election", "leader-election-namespace")
	if err != nil {
		return err
	}
	le.Namespace = ns
	return nil
}
