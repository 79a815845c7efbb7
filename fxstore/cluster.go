package fxstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrKindNotServed is wrapped by Bind's error when the API server does not
// serve a store's kind.
var ErrKindNotServed = errors.New("kind not served by the API server; is the CRD installed?")

// AccessError reports that the API server would refuse a store's list or
// watch.
type AccessError struct {
	User      string
	Verbs     []string // denied verbs: list, watch
	Resource  string   // resource.group
	Namespace string   // empty for all namespaces
	Reason    string   // from the authorizer, if it gave one
}

func (e *AccessError) Error() string {
	where := "at cluster scope"
	if e.Namespace != "" {
		where = fmt.Sprintf("in namespace %q", e.Namespace)
	}
	msg := fmt.Sprintf("forbidden: user %q cannot %s %s %s", e.User, strings.Join(e.Verbs, " or "), e.Resource, where)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	return msg + "; grant it with RBAC (the app's rbac command prints the rules it needs)"
}

// UnreachableError reports that a request got no answer from the API server:
// the connection was refused or timed out, the name did not resolve, TLS
// failed. Every store fails alike then, so Registry.Start reports it once,
// not once per store.
type UnreachableError struct {
	Server string // the API server, as scheme://host[:port]
	Err    error  // why the request got no answer
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the API server at %s: %v; check that --kubeconfig (or $KUBECONFIG) names the right cluster and that its API server is up",
		e.Server, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// unreachable returns err as an *UnreachableError if it says that a request
// got no answer, and err otherwise. A request canceled by its caller is not
// one: the API server may be fine.
func unreachable(err error) error {
	urlErr, ok := errors.AsType[*url.Error](err)
	if !ok || errors.Is(err, context.Canceled) {
		return err
	}
	server := urlErr.URL
	if u, perr := url.Parse(urlErr.URL); perr == nil && u.Host != "" {
		server = u.Scheme + "://" + u.Host
	}
	return &UnreachableError{Server: server, Err: urlErr.Err}
}

// ClusterSource binds stores to a Kubernetes API server. Before a store
// starts, Bind resolves its kind through discovery and asks the API server
// (SelfSubjectAccessReview) whether the app may list and watch it, so a
// missing CRD or RBAC rule fails at once instead of at the sync timeout.
// Each resource is asked about once per namespace, and not in a namespace
// when it is allowed in all of them.
type ClusterSource struct {
	client client.WithWatch
	user   func() string
	// access memoises checkAccess per resource and namespace, as several
	// stores often share both: accessKey → *accessCheck.
	access sync.Map
	// firstLookup is held by each first lookup of a group version's kinds
	// (see restMapping); lookedUp holds the group versions looked up.
	firstLookup sync.Mutex
	lookedUp    sync.Map // schema.GroupVersion → struct{}
	// clusterWide holds the kinds of stores of all namespaces that
	// Registry.Start is binding (see planBinds): schema.GroupKind →
	// struct{}.
	clusterWide sync.Map
}

type accessKey struct {
	resource  schema.GroupResource
	namespace string
}

// NewClusterSource returns a Source listing and watching through c, which
// talks to the API server directly (such as connection.Connection's Client).
// It does no I/O.
func NewClusterSource(c client.WithWatch) *ClusterSource {
	src := &ClusterSource{client: c}
	src.user = sync.OnceValue(src.whoAmI)
	return src
}

// Bind implements Source.
func (c *ClusterSource) Bind(ctx context.Context, key Key) (Binding, error) {
	mapping, err := c.restMapping(key.Kind)
	if meta.IsNoMatchError(err) {
		return Binding{}, fmt.Errorf("%w (%w)", ErrKindNotServed, err)
	}
	if err != nil {
		return Binding{}, unreachable(fmt.Errorf("discover kind: %w", err))
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace && key.Namespace != "" {
		return Binding{}, fmt.Errorf("%s is cluster-scoped; leave Spec.Namespace empty", kindString(key.Kind))
	}
	gr := mapping.Resource.GroupResource()
	if err := c.checkAccess(ctx, gr, key.Namespace, key.Kind.GroupKind()); err != nil {
		return Binding{}, unreachable(err)
	}
	lw, err := newListerWatcher(c.client, key)
	if err != nil {
		return Binding{}, err
	}
	return Binding{ListerWatcher: lw, Resource: gr}, nil
}

// AppliesShardSelectors implements shardSelectorChecker: it lists one
// object with key's shard selector and reports whether the API server says
// it applied it (the list's metadata.shardInfo). The list is unstructured,
// whatever the key's projection: kube-apiserver v1.37 leaves shardInfo out
// of metadata-only lists.
func (c *ClusterSource) AppliesShardSelectors(ctx context.Context, key Key) (bool, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(key.Kind.GroupVersion().WithKind(key.Kind.Kind + "List"))
	err := c.client.List(ctx, list, &client.ListOptions{Namespace: key.Namespace, Limit: 1, Raw: &metav1.ListOptions{ShardSelector: key.Shard}})
	if err != nil {
		return false, err
	}
	_, applied, err := unstructured.NestedFieldNoCopy(list.Object, "metadata", "shardInfo")
	return applied, err
}

// restMapping resolves gvk through the REST mapper, which discovers what it
// does not know yet. The first lookup of each group version runs alone, as
// Registry.Start binds every store at once: controller-runtime's mapper
// discovers everything on its first miss, and each miss waiting for that
// would then fetch its group version again.
// checkList implements listChecker: it lists one object of key's kind in
// its namespace, a plain list that reads etcd, and returns its error.
func (c *ClusterSource) checkList(ctx context.Context, key Key) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(key.Kind.GroupVersion().WithKind(key.Kind.Kind + "List"))
	return c.client.List(ctx, list, &client.ListOptions{Namespace: key.Namespace, Limit: 1})
}

func (c *ClusterSource) restMapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	gv := gvk.GroupVersion()
	if _, ok := c.lookedUp.Load(gv); !ok {
		c.firstLookup.Lock()
		defer c.firstLookup.Unlock()
		defer c.lookedUp.Store(gv, struct{}{})
	}
	return c.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
}

// planBinds implements bindPlanner: a store in one namespace takes the
// answer for its resource in every namespace, which a store of all
// namespaces of its kind asks for anyway.
func (c *ClusterSource) planBinds(keys []Key) {
	for _, k := range keys {
		if k.Namespace == "" {
			c.clusterWide.Store(k.Kind.GroupKind(), struct{}{})
		}
	}
}

// checkAccess asks the API server whether the app may list and watch gr
// (of kind gk) in namespace: once per resource and namespace while the
// answer is yes, as several stores often share both; a denial or a failed
// review is asked again next time, as RBAC may have been fixed since. In a
// namespace, it asks only if the app may not list and watch gr in every
// namespace, as far as known: the review of a store of all namespaces of
// the kind bound at the same time (planBinds), or an earlier one.
func (c *ClusterSource) checkAccess(ctx context.Context, gr schema.GroupResource, namespace string, gk schema.GroupKind) error {
	if namespace != "" {
		if _, ok := c.clusterWide.Load(gk); ok {
			if c.checkAccess(ctx, gr, "", gk) == nil {
				return nil
			}
		} else if v, ok := c.access.Load(accessKey{gr, ""}); ok && v.(*accessCheck).run() == nil {
			return nil
		}
	}
	key := accessKey{gr, namespace}
	for {
		check := &accessCheck{ctx: ctx}
		check.run = sync.OnceValue(func() error { return c.reviewAccess(ctx, gr, namespace) })
		v, _ := c.access.LoadOrStore(key, check)
		check = v.(*accessCheck)
		err := check.run()
		if err == nil {
			return nil
		}
		c.access.CompareAndDelete(key, check)
		// The review ran in the context of the store that asked first. If
		// that one ended (a store dropped while binding: a bucket given
		// up) and this one's has not, ask again in this one's.
		if check.ctx.Err() == nil || ctx.Err() != nil {
			return err
		}
	}
}

// accessCheck is one review of access, shared by the stores that ask for
// it at once; it runs in ctx, the first one's.
type accessCheck struct {
	ctx context.Context
	run func() error
}

func (c *ClusterSource) reviewAccess(ctx context.Context, gr schema.GroupResource, namespace string) error {
	verbs := []string{"list", "watch"}
	allowed := make([]bool, len(verbs))
	reasons := make([]string, len(verbs))
	errs := make([]error, len(verbs))
	var wg sync.WaitGroup
	for i, verb := range verbs {
		wg.Go(func() {
			review := &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: namespace, Verb: verb, Group: gr.Group, Resource: gr.Resource,
				}},
			}
			if err := c.client.Create(ctx, review); err != nil {
				errs[i] = fmt.Errorf("check %s access to %s: %w", verb, gr, err)
				return
			}
			allowed[i], reasons[i] = review.Status.Allowed, review.Status.Reason
		})
	}
	wg.Wait()
	denied := &AccessError{Resource: gr.String(), Namespace: namespace}
	for i, verb := range verbs {
		if errs[i] == nil && !allowed[i] {
			denied.Verbs = append(denied.Verbs, verb)
			denied.Reason = cmp.Or(denied.Reason, reasons[i])
		}
	}
	if len(denied.Verbs) > 0 {
		denied.User = c.user()
		errs = append(errs, denied)
	}
	return errors.Join(errs...)
}

func (c *ClusterSource) whoAmI() string {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.client.Create(context.Background(), review); err != nil {
		return "(unknown: " + err.Error() + ")"
	}
	return review.Status.UserInfo.Username
}
