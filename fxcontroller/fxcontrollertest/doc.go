// Package fxcontrollertest runs fxcontroller controllers without an API
// server, so module authors can unit-test reconcilers in a few lines.
//
// New builds an app of a controller module on in-memory stores
// (fxstoretest) and a controller-runtime fake client. The two are one:
// what a reconciler writes through the client reaches the stores, as it
// would from an API server. Its controllers do not run by themselves. A
// test reconciles one request at a time, then checks the client's
// objects, the result and the recorded events:
//
//	func TestRollout(t *testing.T) {
//		tests := []struct {
//			name string
//			give *appsv1.Deployment
//			want string
//		}{...}
//		for _, tt := range tests {
//			t.Run(tt.name, func(t *testing.T) {
//				app := fxcontrollertest.New(t, rollout.Module, tt.give)
//				_, err := app.Reconcile(t.Context(), "rollout", client.ObjectKeyFromObject(tt.give))
//				require.NoError(t, err)
//				var got appsv1.Deployment
//				require.NoError(t, app.Client().Get(t.Context(), client.ObjectKeyFromObject(tt.give), &got))
//				assert.Equal(t, tt.want, got.Annotations["rollout"])
//			})
//		}
//	}
//
// Every reader shares the objects of a store. A reconcile that changes one
// it read fails the test when it ends, naming the object and what changed.
// The check compares every object once, at the end. After each reconcile,
// it would cost a test of n objects n² comparisons.
//
// Module provides the same fakes to an app of your own, and runs its
// lifecycle. With fxstoretest.Module, its controllers run as in
// production.
package fxcontrollertest
