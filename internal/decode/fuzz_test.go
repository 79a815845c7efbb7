package decode

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/fxkube/fxkube/internal/workload"
)

// FuzzDecode decodes encodings of Pods, truncated or corrupt, both with
// the generated code and with decoders that hold their Deployment's
// replicas: one keeping everything, one dropping managedFields. The
// first fails where the generated code does, with its error; the one
// dropping managedFields may succeed where only they are corrupt.
// Neither panics, and what decodes equals the generated code's object.
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 30s ./internal/decode
func FuzzDecode(f *testing.F) {
	keep, strip := newStore(f, &corev1.Pod{}), newStore(f, &corev1.Pod{}, WithoutManagedFields())
	deployment := workload.Deployment("shop", 1, 4)
	for r := range 4 {
		raw := marshal(f, withManagedFields(workload.Pod(deployment, r)))
		keep.hold(f, raw)
		strip.hold(f, raw)
		f.Add(raw)
		f.Add(raw[:len(raw)/2])
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, ok := requireDecodesAsGenerated(t, keep, raw).(*corev1.Pod)
		if !ok {
			return
		}
		got, err := strip.decoder.Decode(raw)
		require.NoError(t, err)
		want.ManagedFields = nil
		requireSame(t, want, got)
	})
}

// requireDecodesAsGenerated decodes raw with s's decoder and with the
// generated code. Both fail with the same error, or both decode equal
// objects. It returns the generated code's object, or nil.
func requireDecodesAsGenerated(t *testing.T, s *store, raw []byte) any {
	want := reflect.New(s.decoder.root.typ).Interface()
	wantErr := want.(unmarshaler).Unmarshal(raw)
	got, err := s.decoder.Decode(raw)
	if wantErr != nil {
		require.Error(t, err, "the generated code fails: %v", wantErr)
		require.Equal(t, wantErr.Error(), err.Error(), "the same error")
		return nil
	}
	require.NoError(t, err)
	requireSame(t, want, got)
	return want
}

// fuzzKinds are the kinds FuzzDecodeKinds decodes: a workload's and a
// cluster's most common, and some with templates, maps and unions.
var fuzzKinds = []any{
	&appsv1.Deployment{}, &appsv1.ReplicaSet{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{},
	&batchv1.Job{}, &batchv1.CronJob{}, &corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{},
	&corev1.Node{}, &corev1.PersistentVolumeClaim{}, &discoveryv1.EndpointSlice{},
	&networkingv1.Ingress{}, &rbacv1.Role{}, &coordinationv1.Lease{},
}

// FuzzDecodeKinds decodes encodings of the objects of fuzzKinds,
// truncated or corrupt, with the generated code and with a decoder of
// the kind that holds objects of it already. The decoder fails where
// the generated code does, with its error; what decodes equals the
// generated code's object. The first byte picks the kind.
//
//	go test -run '^$' -fuzz FuzzDecodeKinds -fuzztime 30s ./internal/decode
func FuzzDecodeKinds(f *testing.F) {
	fill := objectFuzzer()
	stores := make([]*store, len(fuzzKinds))
	for i, example := range fuzzKinds {
		stores[i] = newStore(f, example)
		typ := reflect.TypeOf(example).Elem()
		for j := range 3 {
			obj := reflect.New(typ)
			fill.Fill(obj.Interface())
			raw := encodeNamed(f, obj, fmt.Sprint("obj-", j))
			stores[i].hold(f, raw)
			f.Add(byte(i), raw)
			f.Add(byte(i), raw[:len(raw)/2])
		}
	}
	f.Fuzz(func(t *testing.T, kind byte, raw []byte) {
		requireDecodesAsGenerated(t, stores[int(kind)%len(stores)], raw)
	})
}
