package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/listwatch"
)

// Source binds stores to a Kubernetes API server: an fxstore.Source.
// Before a store starts, Bind resolves its kind through discovery and asks
// the API server (SelfSubjectAccessReview) whether the app may list and
// watch it, so a missing CRD or RBAC rule fails at once instead of at the
// sync timeout. Each resource is asked about once per namespace, and not
// in a namespace when it is allowed in all of them.
type Source struct {
	client client.WithWatch
	// decoding is set by WithREST.
	decoding *restOption
	user     func() string
	// access memoises checkAccess per resource and namespace, as several
	// stores often share both: accessKey → *accessCheck.
	access sync.Map
	// firstLookup is held by each first lookup of a group version's kinds
	// (see restMapping); lookedUp holds the group versions looked up.
	firstLookup sync.Mutex
	lookedUp    sync.Map // schema.GroupVersion → struct{}
	// clusterWide holds the kinds of stores of all namespaces that the
	// registry is binding (see PlanBinds): schema.GroupKind → struct{}.
	clusterWide sync.Map
}

type accessKey struct {
	resource  schema.GroupResource
	namespace string
}

var _ fxstore.Source = (*Source)(nil)

// NewSource returns a Source listing and watching through c, which talks
// to the API server directly (such as connection.Connection's Client). It
// does no I/O.
func NewSource(c client.WithWatch, opts ...SourceOption) *Source {
	src := &Source{client: c}
	for _, o := range opts {
		o.apply(src)
	}
	src.user = sync.OnceValue(src.whoAmI)
	return src
}

// A SourceOption configures a Source.
type SourceOption interface{ apply(*Source) }

type restOption struct {
	cfg *rest.Config
	hc  *http.Client
}

func (o *restOption) apply(s *Source) { s.decoding = o }
func (o *restOption) String() string  { return "apiserver.WithREST(cfg, httpClient)" }

// WithREST lists and watches the stores of Kubernetes' own kinds
// (client-go's scheme) that share their objects' parts through a REST
// client of their own on cfg and hc, the connection's. Their objects
// then travel as protobuf, and each store decodes only the parts of an
// object it has not seen (see fxstore.WithoutSharing).
func WithREST(cfg *rest.Config, hc *http.Client) SourceOption { return &restOption{cfg, hc} }

// Bind implements fxstore.Source.
func (c *Source) Bind(ctx context.Context, key fxstore.Key) (fxstore.Binding, error) {
	mapping, err := c.restMapping(key.Kind)
	if meta.IsNoMatchError(err) {
		return fxstore.Binding{}, fmt.Errorf("%w (%w)", ErrKindNotServed, err)
	}
	if err != nil {
		return fxstore.Binding{}, unreachable(fmt.Errorf("discover kind: %w", err))
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace && key.Namespace != "" {
		return fxstore.Binding{}, fmt.Errorf("%s is cluster-scoped; leave Spec.Namespace empty", key.Kind.Kind)
	}
	gr := mapping.Resource.GroupResource()
	if err := c.checkAccess(ctx, gr, key.Namespace, key.Kind.GroupKind()); err != nil {
		return fxstore.Binding{}, unreachable(err)
	}
	lw, err := c.listerWatcher(key, mapping)
	if err != nil {
		return fxstore.Binding{}, err
	}
	return fxstore.Binding{ListerWatcher: lw, Resource: gr}, nil
}

// listerWatcher returns how the store of key lists and watches: through
// a REST client of its own for a kind of client-go's scheme, with
// WithREST; else through the Source's client.
func (c *Source) listerWatcher(key fxstore.Key, mapping *meta.RESTMapping) (cache.ListerWatcher, error) {
	if c.decoding != nil && key.Projection == fxstore.Typed && clientgoscheme.Scheme.Recognizes(key.Kind) {
		return listwatch.NewDecoding(c.decoding.cfg, c.decoding.hc, c.client.Scheme(), key, mapping.Resource.Resource,
			mapping.Scope.Name() == meta.RESTScopeNameNamespace)
	}
	return listwatch.New(c.client, key)
}

// AppliesShardSelectors lists one object with key's shard selector and
// reports whether the API server says it applied it (the list's
// metadata.shardInfo). fxstore's registry asks it before it plans sharded
// stores. The list is unstructured,
// whatever the key's projection: kube-apiserver v1.37 leaves shardInfo out
// of metadata-only lists.
func (c *Source) AppliesShardSelectors(ctx context.Context, key fxstore.Key) (bool, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(key.Kind.GroupVersion().WithKind(key.Kind.Kind + "List"))
	err := c.client.List(ctx, list, &client.ListOptions{Namespace: key.Namespace, Limit: 1, Raw: &metav1.ListOptions{ShardSelector: key.Shard}})
	if err != nil {
		return false, err
	}
	_, applied, err := unstructured.NestedFieldNoCopy(list.Object, "metadata", "shardInfo")
	return applied, err
}

// CheckList lists one object of key's kind in its namespace, a plain list
// that reads etcd, and returns its error. fxstore's registry asks it to
// diagnose a store that fails or does not sync without saying why.
func (c *Source) CheckList(ctx context.Context, key fxstore.Key) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(key.Kind.GroupVersion().WithKind(key.Kind.Kind + "List"))
	return c.client.List(ctx, list, &client.ListOptions{Namespace: key.Namespace, Limit: 1})
}

// restMapping resolves gvk through the REST mapper, which discovers what it
// does not know yet. The first lookup of each group version runs alone, as
// the registry binds every store at once: controller-runtime's mapper
// discovers everything on its first miss, and each miss waiting for that
// would then fetch its group version again.
func (c *Source) restMapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	gv := gvk.GroupVersion()
	if _, ok := c.lookedUp.Load(gv); !ok {
		c.firstLookup.Lock()
		defer c.firstLookup.Unlock()
		defer c.lookedUp.Store(gv, struct{}{})
	}
	return c.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
}

// PlanBinds is told, before the registry binds stores at once, which it
// binds: a store in one namespace then takes the answer for its resource
// in every namespace, which a store of all namespaces of its kind asks
// for anyway.
func (c *Source) PlanBinds(keys []fxstore.Key) {
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
// the kind bound at the same time (PlanBinds), or an earlier one.
func (c *Source) checkAccess(ctx context.Context, gr schema.GroupResource, namespace string, gk schema.GroupKind) error {
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

func (c *Source) reviewAccess(ctx context.Context, gr schema.GroupResource, namespace string) error {
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

func (c *Source) whoAmI() string {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.client.Create(context.Background(), review); err != nil {
		return "(unknown: " + err.Error() + ")"
	}
	return review.Status.UserInfo.Username
}
