package app

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/fxkube/fxkube/fxcontroller"
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
func (a *app) rbac(saNamespace, saName string) ([]any, error) {
	reg, ctrls, hosted, err := a.graphOf()
	if err != nil {
		return nil, err
	}
	// Reads: a resource all of whose stores name one namespace is read
	// through a Role there; otherwise through the ClusterRole.
	namespaces := map[schema.GroupResource]map[string]bool{}
	for _, s := range reg.Stores() {
		gvr, _ := meta.UnsafeGuessKindToResource(s.Key.Kind)
		gr := gvr.GroupResource()
		if namespaces[gr] == nil {
			namespaces[gr] = map[string]bool{}
		}
		namespaces[gr][s.Key.Namespace] = true
	}
	cluster := rbacScope{}
	inNamespace := map[string]rbacScope{}
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
	infos := make([]fxcontroller.Info, 0, len(ctrls)+len(hosted))
	for _, c := range ctrls {
		infos = append(infos, c.Info())
	}
	for _, h := range hosted {
		infos = append(infos, h.Info())
	}
	for _, info := range infos {
		for _, w := range append(info.Writes, fxcontroller.EventsWrite) {
			cluster.add(w.Resource, w.Verbs...)
		}
	}
	if le := a.flags.lifecycle.LeaderElection; le.Enabled {
		if inNamespace[le.Namespace] == nil {
			inNamespace[le.Namespace] = rbacScope{}
		}
		inNamespace[le.Namespace].add(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "get", "create", "update")
	}

	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: saName}}
	typeMeta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
	}
	objs := []any{
		&rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: a.name}, Rules: cluster.rules()},
		&rbacv1.ClusterRoleBinding{
			TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: metav1.ObjectMeta{Name: a.name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: a.name},
			Subjects: subject,
		},
	}
	for _, ns := range slices.Sorted(maps.Keys(inNamespace)) {
		meta := metav1.ObjectMeta{Namespace: ns, Name: a.name}
		objs = append(objs,
			&rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta, Rules: inNamespace[ns].rules()},
			&rbacv1.RoleBinding{
				TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta,
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: a.name},
				Subjects: subject,
			})
	}
	return objs, nil
}

// yamlDocuments renders objects as one multi-document YAML stream.
func yamlDocuments(objs []any) ([]byte, error) {
	var buf bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

func (a *app) rbacCommand() *cobra.Command {
	var serviceAccount string
	cmd := &cobra.Command{
		Use:   "rbac",
		Short: "Print the RBAC the declared stores and controllers need, as YAML for kubectl apply -f -",
		Long: `Print the RBAC the declared stores and controllers need, as YAML for kubectl apply -f -.

Stores need get, list and watch on their resource: through a Role in a
namespace when every store of the resource is confined to it, else through
the ClusterRole. Controllers need what they declared with fxcontroller.Writes,
and to create and patch events. With --leader-elect, the Role in the lease's
namespace covers the Lease. Resources are named from kinds by Kubernetes'
usual plural rule; check irregular CRD plurals.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, name, ok := strings.Cut(serviceAccount, "/")
			if !ok || ns == "" || name == "" {
				return fmt.Errorf("--service-account %q: want namespace/name", serviceAccount)
			}
			objs, err := a.rbac(ns, name)
			if err != nil {
				return err
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
	return cmd
}
