package kubeconfig

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/workqueue"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/contract"
)

const (
	// DefaultSecretLabel marks kubeconfig Secrets, with the value "true":
	// multicluster-runtime's kubeconfig provider's label, so an existing
	// fleet's Secrets work.
	DefaultSecretLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig"

	// DefaultSecretKey is the data key of the kubeconfig in a Secret, as
	// multicluster-runtime's.
	DefaultSecretKey = "kubeconfig"
)

// SecretOptions say which Secrets a SecretProvider reads.
type SecretOptions struct {
	// Namespace holds the kubeconfig Secrets. Required: whoever may
	// write Secrets there may add clusters to the app.
	Namespace string

	// Label marks kubeconfig Secrets: those whose label has the value
	// "true". Defaults to DefaultSecretLabel.
	Label string

	// Key is the data key of the kubeconfig in a Secret. Defaults to
	// DefaultSecretKey.
	Key string

	// NameAnnotation, when set, names a Secret's cluster by the value of
	// this annotation, a DNS subdomain; a Secret without it is named by
	// its name. Two Secrets that claim one name engage neither. Defaults
	// to naming each cluster by its Secret's name, as
	// multicluster-runtime does.
	NameAnnotation string

	// Policy says what a Secret's kubeconfig may do besides connecting.
	// Defaults to neither running credential plugins nor reading files.
	Policy

	// Logger logs clusters that join and leave, and Secrets refused.
	// Defaults to no logs; ProvideSecrets gives it the app's.
	Logger *zap.Logger
}

// SecretProvider engages a member cluster for each kubeconfig Secret in a
// namespace of the app's own cluster, as multicluster-runtime's kubeconfig
// provider does:
//
//   - a Secret added engages its cluster, named by the Secret's name;
//   - a Secret whose kubeconfig changes reconnects it: the cluster's
//     context ends, and it is engaged again with the new config;
//   - a Secret deleted, unlabelled or refused ends its cluster's context:
//     the cluster leaves.
//
// A Secret is refused when its kubeconfig cannot be parsed, breaks the
// Policy, or claims a cluster name another Secret claims. The refusal is
// logged once, naming the Secret and the fix; other clusters are
// unaffected.
//
// It reads the Secrets from a store of the app's registry, so they sync
// with the app's start, and rbac lists the access they need.
type SecretProvider struct {
	opts    SecretOptions
	log     *zap.Logger
	secrets *fxstore.Store[*corev1.Secret]
	index   string
	started atomic.Bool
}

var _ fxcluster.Provider = (*SecretProvider)(nil)

// NewSecretProvider returns a provider of the kubeconfig Secrets opts
// name, and asks stores for their store. It does no I/O.
func NewSecretProvider(stores *fxstore.Registry, opts SecretOptions) (*SecretProvider, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	p := &SecretProvider{opts: opts, log: opts.Logger, index: "kubeconfig.cluster-name"}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	if opts.NameAnnotation != "" {
		// An index's name is bound to one function; this one depends on
		// the annotation.
		p.index += "/" + opts.NameAnnotation
	}
	var err error
	p.secrets, err = fxstore.For[*corev1.Secret](stores,
		fxstore.Spec{Namespace: opts.Namespace, LabelSelector: opts.Label + "=true"},
		fxstore.WithIndex(p.index, func(s *corev1.Secret) []string { return []string{string(p.clusterName(s))} }))
	if err != nil {
		return nil, fmt.Errorf("kubeconfig Secrets of namespace %s: %w", opts.Namespace, err)
	}
	return p, nil
}

// validate checks opts and fills in the defaults.
func (o *SecretOptions) validate() error {
	if o.Label == "" {
		o.Label = DefaultSecretLabel
	}
	if o.Key == "" {
		o.Key = DefaultSecretKey
	}
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("kubeconfig SecretOptions.Namespace is empty; name the namespace that holds the kubeconfig Secrets"))
	} else if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("kubeconfig SecretOptions.Namespace %q is not a namespace name: %s", o.Namespace, strings.Join(msgs, "; ")))
	}
	for _, f := range []struct{ field, value string }{{"Label", o.Label}, {"NameAnnotation", o.NameAnnotation}} {
		if msgs := validation.IsQualifiedName(f.value); f.value != "" && len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("kubeconfig SecretOptions.%s %q is not a label or annotation key: %s", f.field, f.value, strings.Join(msgs, "; ")))
		}
	}
	if msgs := validation.IsConfigMapKey(o.Key); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("kubeconfig SecretOptions.Key %q is not a Secret data key: %s", o.Key, strings.Join(msgs, "; ")))
	}
	return errors.Join(errs...)
}

// clusterName returns the name of the cluster s claims.
func (p *SecretProvider) clusterName(s *corev1.Secret) fxcluster.ClusterName {
	if name, ok := s.Annotations[p.opts.NameAnnotation]; ok && p.opts.NameAnnotation != "" {
		return fxcluster.ClusterName(name)
	}
	return fxcluster.ClusterName(s.Name)
}

// String describes the provider.
func (p *SecretProvider) String() string {
	return fmt.Sprintf("kubeconfig Secrets %s=true in namespace %s", p.opts.Label, p.opts.Namespace)
}

// Start engages a cluster for each kubeconfig Secret once their store
// has synced, and follows the Secrets until ctx ends. Then every
// cluster's context has ended, and it returns nil. It may be called once.
func (p *SecretProvider) Start(ctx context.Context, clusters fxcluster.Aware) error {
	if !p.started.CompareAndSwap(false, true) {
		return fmt.Errorf("%s: started twice; a provider runs once", p)
	}
	// The handler only queues names: the worker reads the Secrets that
	// claim a name from the store, so what it engages is what the
	// store holds, whatever the order of events.
	queue := workqueue.NewTyped[fxcluster.ClusterName]()
	defer queue.ShutDown()
	sub, err := p.secrets.Subscribe(fxstore.HandlerFuncs[*corev1.Secret]{
		AddFunc: func(s *corev1.Secret, _ bool) { queue.Add(p.clusterName(s)) },
		UpdateFunc: func(old, s *corev1.Secret) {
			queue.Add(p.clusterName(old))
			queue.Add(p.clusterName(s))
		},
		DeleteFunc: func(s *corev1.Secret) { queue.Add(p.clusterName(s)) },
	})
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := p.secrets.WaitForSync(ctx); err != nil {
		return nil // ctx ended
	}
	r := &secretClusters{p: p, aware: clusters, engaged: make(map[fxcluster.ClusterName]*secretCluster)}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			name, shutdown := queue.Get()
			if shutdown {
				return
			}
			if ctx.Err() == nil { // what is queued as ctx ends is dropped
				r.reconcile(ctx, name)
			}
			queue.Done(name)
		}
	})
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	for _, c := range r.engaged {
		if c.cancel != nil {
			c.cancel()
		}
	}
	return nil
}

// secretClusters are the clusters of a started SecretProvider. Only its
// worker uses them.
type secretClusters struct {
	p       *SecretProvider
	aware   fxcluster.Aware
	engaged map[fxcluster.ClusterName]*secretCluster
}

// secretCluster is a cluster name some Secret claimed.
type secretCluster struct {
	// secret is the Secret engaged, as namespace/name.
	secret string
	// hash is of the kubeconfig engaged, or that Engage refused.
	hash [sha256.Size]byte
	// cancel ends the engaged cluster's context; nil when not engaged.
	cancel context.CancelFunc
	// problem is why the name is refused, as logged; "" when it is not.
	problem string
}

// reconcile engages, reconnects or lets go of the cluster name, as the
// Secrets that claim it say.
func (r *secretClusters) reconcile(ctx context.Context, name fxcluster.ClusterName) {
	all, err := r.p.secrets.ByIndex(r.p.index, string(name))
	if err != nil {
		r.p.log.Error("read kubeconfig Secrets", zap.Stringer("cluster", name), zap.Error(err))
		return
	}
	secrets := slices.DeleteFunc(all, func(s *corev1.Secret) bool { return s.DeletionTimestamp != nil })
	switch len(secrets) {
	case 0:
		r.leave(name)
		return
	case 1:
	default:
		refs := make([]string, len(secrets))
		for i, s := range secrets {
			refs[i] = s.Namespace + "/" + s.Name
		}
		slices.Sort(refs)
		r.refuse(name, strings.Join(refs, ", "), fmt.Sprintf(
			"cluster %q is claimed by %d kubeconfig Secrets; engaging none until one does: delete the others, or change their annotation %s",
			name, len(secrets), r.p.opts.NameAnnotation))
		return
	}
	s := secrets[0]
	ref := s.Namespace + "/" + s.Name
	if msgs := validation.IsDNS1123Subdomain(string(name)); len(msgs) > 0 {
		r.refuse(name, ref, fmt.Sprintf("Secret %s: annotation %s=%q is not a cluster name: %s",
			ref, r.p.opts.NameAnnotation, name, strings.Join(msgs, "; ")))
		return
	}
	data := s.Data[r.p.opts.Key]
	if len(data) == 0 {
		r.refuse(name, ref, fmt.Sprintf("Secret %s has no kubeconfig: its data key %q is missing or empty; put the kubeconfig there", ref, r.p.opts.Key))
		return
	}
	cfg, err := Load(data, LoadOptions{Policy: r.p.opts.Policy})
	if err != nil {
		r.refuse(name, ref, fmt.Sprintf("Secret %s, data key %q: %v", ref, r.p.opts.Key, err))
		return
	}
	hash := sha256.Sum256(data)
	c := r.engaged[name]
	if c != nil && c.hash == hash {
		c.secret = ref
		return // engaged, or refused by Engage, with these bytes already
	}
	reconnect := c != nil && c.cancel != nil
	if reconnect {
		c.cancel()
	}
	cctx, cancel := context.WithCancel(ctx)
	if err := r.aware.Engage(cctx, name, cfg); err != nil {
		cancel()
		r.p.log.Error("member cluster refused", zap.Stringer("cluster", name), zap.String("secret", ref), zap.Error(err))
		r.engaged[name] = &secretCluster{secret: ref, hash: hash, problem: err.Error()}
		return
	}
	msg := "member cluster engaged"
	if reconnect {
		msg = "member cluster reconnected with new credentials"
	}
	r.p.log.Info(msg, zap.Stringer("cluster", name), zap.String("secret", ref), zap.String("server", cfg.Host))
	r.engaged[name] = &secretCluster{secret: ref, hash: hash, cancel: cancel}
}

// leave ends the context of cluster name, whose last Secret went.
func (r *secretClusters) leave(name fxcluster.ClusterName) {
	c := r.engaged[name]
	if c == nil {
		return
	}
	delete(r.engaged, name)
	if c.cancel != nil {
		c.cancel()
		r.p.log.Info("member cluster left: its kubeconfig Secret is gone", zap.Stringer("cluster", name), zap.String("secret", c.secret))
	}
}

// refuse lets go of cluster name, for problem, found in secrets. It logs
// a problem once.
func (r *secretClusters) refuse(name fxcluster.ClusterName, secrets, problem string) {
	c := r.engaged[name]
	if c == nil {
		c = &secretCluster{}
		r.engaged[name] = c
	}
	left := c.cancel != nil
	if left {
		c.cancel()
	}
	if left || c.problem != problem {
		msg := "kubeconfig Secret refused"
		if left {
			msg = "member cluster left: its kubeconfig Secret is refused"
		}
		r.p.log.Error(msg, zap.Stringer("cluster", name), zap.String("secret", secrets), zap.String("error", problem))
	}
	*c = secretCluster{problem: problem}
}

// secretParams are what ProvideSecrets' provider is built from.
type secretParams struct {
	fx.In

	Stores *fxstore.Registry
	Logger *zap.Logger `optional:"true"`
}

// ProvideSecrets adds a SecretProvider with opts to the app's cluster
// providers. It logs with the app's logger unless opts.Logger is set.
func ProvideSecrets(opts SecretOptions) fx.Option {
	return fx.Provide(fx.Annotate(func(p secretParams) (fxcluster.Provider, error) {
		o := opts
		if o.Logger == nil && p.Logger != nil {
			o.Logger = p.Logger.Named("kubeconfig")
		}
		return NewSecretProvider(p.Stores, o)
	}, fx.ResultTags(`group:"`+contract.ClusterProvidersGroup+`"`)))
}
