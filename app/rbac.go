package app

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
)

// rbacScope collects, for one place (the cluster, or one namespace), the
// verbs needed on each resource.
type rbacScope map[schema.GroupResource]map[string]bool

func (s rbacScope) add(gr schema.GroupResource, verbs ...string) {
	if s[gr] == nil {
		s[gr] = map[string]bool{}
	}
	for _, v := range verbs {
		s[gr][v] = true
	}
}

// rules turns the scope into RBAC rules, one per resource, sorted.
func (s rbacScope) rules() []rbacv1.PolicyRule {
	grs := slices.SortedFunc(maps.Keys(s), func(a, b schema.GroupResource) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource))
	})
	rules := make([]rbacv1.PolicyRule, len(grs))
	for i, gr := range grs {
		rules[i] = rbacv1.PolicyRule{
			APIGroups: []string{gr.Group},
			Resources: []string{gr.Resource},
			Verbs:     slices.Sorted(maps.Keys(s[gr])),
		}
	}
	return rules
}

// rbac returns the RBAC objects the app needs, bound to the service account
// namespace/name: a ClusterRole for what spans namespaces, and a Role in each
// namespace that every store of some resource is confined to.
//
// members are what the app needs in each member cluster (fxcluster), for
// the stores and controllers it declared there, bound to member: the
// ClusterRole <app>-member, and a Role <app>-member in each namespace that
// every member store of some resource is confined to. An app that asks
// nothing of members has none.
func (a *app) rbac(saNamespace, saName string, member rbacv1.Subject, mapper meta.RESTMapper) (own, members []any, err error) {
	d, err := a.graphOf()
	if err != nil {
		return nil, nil, err
	}
	if own, err = a.ownRBAC(d, saNamespace, saName, mapper); err != nil {
		return nil, nil, err
	}
	if members, err = a.memberRBAC(d.fleet, member, mapper); err != nil {
		return nil, nil, fmt.Errorf("in member clusters: %w", err)
	}
	return own, members, nil
}

// memberRBAC returns what the app needs in each member cluster, bound to
// subject.
func (a *app) memberRBAC(f *fxcluster.Fleet, subject rbacv1.Subject, mapper meta.RESTMapper) ([]any, error) {
	var keys []fxstore.Key
	for _, s := range f.Stores() {
		keys = append(keys, s.Key)
	}
	ctrls := f.Controllers()
	if len(keys) == 0 && len(ctrls) == 0 {
		return nil, nil
	}
	cluster, inNamespace, err := readScopes(keys, mapper)
	if err != nil {
		return nil, err
	}
	for _, c := range ctrls {
		for _, w := range c.Info().Writes {
			cluster.add(w.Resource, w.Verbs...)
		}
	}
	return roles(a.name+"-member", cluster, inNamespace, []rbacv1.Subject{subject}), nil
}

// ownRBAC returns what the app needs in its own cluster, bound to the
// service account saNamespace/saName.
func (a *app) ownRBAC(d declared, saNamespace, saName string, mapper meta.RESTMapper) ([]any, error) {
	reg, ctrls, hosted, shards := d.reg, d.ctrls, d.hosted, d.shards
	// A sharded store's buckets' stores read what its whole spec does.
	sharded := shards.Info().Stores
	var keys []fxstore.Key
	for _, s := range sharded {
		keys = append(keys, s.Key)
	}
	for _, s := range reg.Stores() {
		keys = append(keys, s.Key)
	}
	cluster, inNamespace, err := readScopes(keys, mapper)
	if err != nil {
		return nil, err
	}
	infos := make([]fxcontroller.Info, 0, len(ctrls)+len(hosted))
	for _, c := range ctrls {
		infos = append(infos, c.Info())
	}
	for _, h := range hosted {
		// Hosted operators may also record core/v1 Events
		// (mgr.GetEventRecorderFor).
		info := h.Info()
		info.Writes = append(info.Writes, coreEventsWrite)
		infos = append(infos, info)
	}
	for _, info := range infos {
		for _, w := range append(info.Writes, eventsWrite) {
			cluster.add(w.Resource, w.Verbs...)
		}
	}
	if le := a.flags.lifecycle.LeaderElection; le.Enabled {
		// Without a namespace the Lease is in the pod's, which is its
		// service account's.
		ns := cmp.Or(le.Namespace, saNamespace)
		if inNamespace[ns] == nil {
			inNamespace[ns] = rbacScope{}
		}
		inNamespace[ns].add(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "get", "create", "update")
	}
	// The coordinators of sharded stores and of member clusters shared
	// out watch their group's Leases, take and renew bucket Leases, and
	// delete their member Lease (and crashed members').
	var coordinated []string
	if len(sharded) > 0 {
		coordinated = append(coordinated, shards.Info().Namespace)
	}
	if share := d.fleet.Sharing(); share != nil {
		coordinated = append(coordinated, share.Namespace)
	}
	for _, ns := range coordinated {
		ns = cmp.Or(ns, saNamespace)
		if inNamespace[ns] == nil {
			inNamespace[ns] = rbacScope{}
		}
		inNamespace[ns].add(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "get", "list", "watch", "create", "update", "delete")
	}

	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: saName}}
	objs := roles(a.name, cluster, nil, subject)
	if lc := a.flags.lifecycle; lc.MetricsSecure && lc.MetricsBindAddress != "0" {
		objs = append(objs, a.metricsRBAC(subject)...)
	}
	objs = append(objs, roles(a.name, nil, inNamespace, subject)...)
	return objs, nil
}

// roles returns a ClusterRole name of the rules of cluster, when it is not
// nil, and a Role name of the rules of each namespace of inNamespace, each
// bound to subject.
func roles(name string, cluster rbacScope, inNamespace map[string]rbacScope, subject []rbacv1.Subject) []any {
	var objs []any
	if cluster != nil {
		objs = append(objs,
			&rbacv1.ClusterRole{TypeMeta: rbacTypeMeta("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: cluster.rules()},
			&rbacv1.ClusterRoleBinding{
				TypeMeta: rbacTypeMeta("ClusterRoleBinding"), ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects: subject,
			})
	}
	for _, ns := range slices.Sorted(maps.Keys(inNamespace)) {
		meta := metav1.ObjectMeta{Namespace: ns, Name: name}
		objs = append(objs,
			&rbacv1.Role{TypeMeta: rbacTypeMeta("Role"), ObjectMeta: meta, Rules: inNamespace[ns].rules()},
			&rbacv1.RoleBinding{
				TypeMeta: rbacTypeMeta("RoleBinding"), ObjectMeta: meta,
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects: subject,
			})
	}
	return objs
}

// readScopes returns the reads of the stores of keys: a resource all of
// whose stores name one namespace is read through a Role there;
// otherwise through the ClusterRole.
func readScopes(keys []fxstore.Key, mapper meta.RESTMapper) (cluster rbacScope, inNamespace map[string]rbacScope, err error) {
	namespaces := map[schema.GroupResource]map[string]bool{}
	var unmapped []error
	for _, key := range keys {
		mapping, err := mapper.RESTMapping(key.Kind.GroupKind(), key.Kind.Version)
		if err != nil {
			unmapped = append(unmapped, fmt.Errorf("store %s: %w", key, err))
			continue
		}
		gr := mapping.Resource.GroupResource()
		if namespaces[gr] == nil {
			namespaces[gr] = map[string]bool{}
		}
		namespaces[gr][key.Namespace] = true
	}
	if len(unmapped) > 0 {
		return nil, nil, fmt.Errorf("name the resources of the stores' kinds: pass the CRDs of custom kinds with --crds, or ask the cluster with --discover:\n%w", errors.Join(unmapped...))
	}
	cluster = rbacScope{}
	inNamespace = map[string]rbacScope{}
	for gr, nss := range namespaces {
		if nss[""] {
			cluster.add(gr, "get", "list", "watch")
			continue
		}
		for ns := range nss {
			if inNamespace[ns] == nil {
				inNamespace[ns] = rbacScope{}
			}
			inNamespace[ns].add(gr, "get", "list", "watch")
		}
	}
	return cluster, inNamespace, nil
}

// metricsRBAC is what secure metrics need, as kubebuilder scaffolds it
// (config/rbac/metrics_auth_role.yaml and metrics_reader_role.yaml): the app
// asks the API server to authenticate (TokenReview) and authorize
// (SubjectAccessReview) each scrape, through the ClusterRole
// <app>-metrics-auth bound to its service account; scrapers need
// <app>-metrics-reader, which whoever deploys them binds.
func (a *app) metricsRBAC(subject []rbacv1.Subject) []any {
	auth := metav1.ObjectMeta{Name: a.name + "-metrics-auth"}
	return []any{
		&rbacv1.ClusterRole{
			TypeMeta: rbacTypeMeta("ClusterRole"), ObjectMeta: auth,
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
				{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta: rbacTypeMeta("ClusterRoleBinding"), ObjectMeta: auth,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: auth.Name},
			Subjects: subject,
		},
		&rbacv1.ClusterRole{
			TypeMeta: rbacTypeMeta("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: a.name + "-metrics-reader"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		},
	}
}

func rbacTypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
}

// eventsWrite is what every controller's event recorder needs: Events are
// created, and series of them patched. Controllers need not declare it.
var eventsWrite = fxcontroller.Write{Resource: schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, Verbs: []string{"create", "patch"}}

// coreEventsWrite is what a core/v1 event recorder needs.
var coreEventsWrite = fxcontroller.Write{Resource: schema.GroupResource{Resource: "events"}, Verbs: []string{"create", "patch"}}

// rbacMapper names the resources of kinds for rbac: through discovery with
// --discover; otherwise from the CRDs given and, for the kinds built into
// Kubernetes, by their regular plurals.
func (a *app) rbacMapper(discover bool, crds []string) (meta.RESTMapper, error) {
	if discover {
		cfg, err := loadConfig()
		if err != nil {
			return nil, fmt.Errorf("--discover: %w", err)
		}
		conn, err := connection.New(cfg, clientgoscheme.Scheme)
		if err != nil {
			return nil, fmt.Errorf("--discover: %w", err)
		}
		return conn.Mapper, nil
	}
	// rbac needs only the resources' names, not their scopes.
	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		// Kubernetes names its own resources by these regular plurals.
		plural, singular := meta.UnsafeGuessKindToResource(gvk)
		mapper.AddSpecific(gvk, plural, singular, meta.RESTScopeNamespace)
	}
	// Controllers that wait for their kinds watch CRDs.
	crd := apiextensionsv1.SchemeGroupVersion
	mapper.AddSpecific(crd.WithKind("CustomResourceDefinition"), crd.WithResource("customresourcedefinitions"),
		crd.WithResource("customresourcedefinition"), meta.RESTScopeRoot)
	for _, path := range crds {
		defs, err := readCRDs(path)
		if err != nil {
			return nil, fmt.Errorf("--crds: %w", err)
		}
		for _, crd := range defs {
			scope := meta.RESTScopeNamespace
			if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
				scope = meta.RESTScopeRoot
			}
			for _, v := range crd.Spec.Versions {
				gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
				mapper.AddSpecific(gv.WithKind(crd.Spec.Names.Kind), gv.WithResource(crd.Spec.Names.Plural), gv.WithResource(crd.Spec.Names.Singular), scope)
			}
		}
	}
	return mapper, nil
}

// readCRDs reads the CustomResourceDefinitions in the YAML file at path, or
// in the .yaml and .yml files of the directory at path (as kubebuilder's
// config/crd/bases holds them).
func readCRDs(path string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	files := []string{path}
	if info, err := os.Stat(path); err != nil {
		return nil, err
	} else if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		files = files[:0]
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := dec.Decode(&crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if crd.Kind == "CustomResourceDefinition" {
				crds = append(crds, crd)
			}
		}
	}
	return crds, nil
}

// yamlComment is a comment in a YAML stream, heading the document that
// follows.
type yamlComment string

// yamlDocuments renders objects as one multi-document YAML stream.
func yamlDocuments(objs []any) ([]byte, error) {
	var buf bytes.Buffer
	headed := false
	for i, o := range objs {
		if i > 0 && !headed {
			buf.WriteString("---\n")
		}
		if c, ok := o.(yamlComment); ok {
			for line := range strings.Lines(string(c)) {
				buf.WriteString("# " + strings.TrimSuffix(line, "\n") + "\n")
			}
			headed = true
			continue
		}
		headed = false
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// namespacedName splits the value of flag, "namespace/name".
func namespacedName(flag, value string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(value, "/")
	if !ok || namespace == "" || name == "" {
		return "", "", fmt.Errorf("%s %q: want namespace/name", flag, value)
	}
	return namespace, name, nil
}

// memberComment heads what app needs in each member cluster.
func memberComment(app string) string {
	return "For each member cluster, not the app's own: what " + app + " needs there,\n" +
		"bound to the identity its kubeconfig of the member authenticates as.\n" +
		"Apply it in every member: " + app + " rbac --only members | kubectl --context <member> apply -f -"
}

func (a *app) rbacCommand() *cobra.Command {
	var (
		serviceAccount string
		memberAccount  string
		only           string
		discover       bool
		crds           []string
	)
	cmd := &cobra.Command{
		Use:   "rbac",
		Short: "Print the RBAC the declared stores and controllers need, as YAML for kubectl apply -f -",
		Long: `Print the RBAC the declared stores and controllers need, as YAML for kubectl apply -f -.

Stores need get, list and watch on their resource: through a Role in a
namespace when every store of the resource is confined to it, else through
the ClusterRole. Controllers need what they declared with fxcontroller.Writes,
and to create and patch events. Hosted controller-runtime operators
(fxcontroller.SetupWithManager) need what their setup declared with the
fxcontroller.Writes option — writes cannot be read from Go code, so declare
every kind the operator creates, updates, patches or deletes, and its status
updates ("tasks/status") — and to create and patch core/v1 events too.
Kinds a hosted reconciler only reads (a Get of a kind no controller watches,
which starts a store late) are not known before it runs: declare them too,
as fxcontroller.Writes(resource, "get", "list", "watch").

Give rbac the flags the app runs with. With --leader-elect, the Role in the
lease's namespace (by default the service account's) covers the Lease. With
secure metrics (--metrics-secure, the default, and a --metrics-bind-address
other than "0"), the ClusterRole <app>-metrics-auth, bound to the service
account, lets the app create the TokenReviews and SubjectAccessReviews that
check each scrape, and the ClusterRole <app>-metrics-reader grants get on
/metrics: bind it to the scraper's service account (Prometheus's).

An app with stores or controllers in every member cluster (fxcluster)
needs RBAC there too, printed after the app's own under a comment: the
ClusterRole <app>-member (and a Role <app>-member in each namespace every
member store of a resource is confined to), with get, list and watch on
the member stores' resources and what its controllers across clusters
declared with fxcluster.Writes. It is bound to the service account the
app's kubeconfig of each member authenticates as: --member-service-account,
by default --service-account. --only own or --only members prints one set,
to apply in the app's cluster or in each member.

Resources are named through REST mappings: with --discover, the cluster's
discovery; otherwise, for custom kinds, the CRDs given with --crds (whose
plurals may be irregular), and for kinds built into Kubernetes, their
plurals. A store of a custom kind neither gives is an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, name, err := namespacedName("--service-account", serviceAccount)
			if err != nil {
				return err
			}
			member := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
			if memberAccount != "" {
				if member.Namespace, member.Name, err = namespacedName("--member-service-account", memberAccount); err != nil {
					return err
				}
			}
			if only != "" && only != "own" && only != "members" {
				return fmt.Errorf("--only %q: want own or members", only)
			}
			mapper, err := a.rbacMapper(discover, crds)
			if err != nil {
				return err
			}
			own, members, err := a.rbac(ns, name, member, mapper)
			if err != nil {
				return err
			}
			var objs []any
			if only != "members" {
				objs = own
			}
			if only != "own" && len(members) > 0 {
				objs = append(objs, yamlComment(memberComment(a.name)))
				objs = append(objs, members...)
			}
			if only == "members" && len(members) == 0 {
				return errors.New("--only members: the app asks nothing of member clusters")
			}
			out, err := yamlDocuments(objs)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&serviceAccount, "service-account", "default/"+a.name, "namespace/name of the service account the app runs as")
	cmd.Flags().StringVar(&memberAccount, "member-service-account", "", "namespace/name of the service account the app's kubeconfig of each member cluster authenticates as (default: --service-account)")
	cmd.Flags().StringVar(&only, "only", "", `print only what the app needs in its own cluster ("own") or in each member cluster ("members"); both by default`)
	cmd.Flags().BoolVar(&discover, "discover", false, "name resources through the discovery of the cluster of --kubeconfig")
	cmd.Flags().StringSliceVar(&crds, "crds", nil, "CRD manifests (files, or directories such as config/crd/bases) naming the resources of custom kinds")
	return cmd
}
