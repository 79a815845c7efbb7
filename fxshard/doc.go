// Package fxshard shares the keys of a controller out among its replicas.
// The hash space of a shard key is cut into buckets. Each bucket is owned
// by one replica at a time through a Kubernetes Lease, with fencing: no
// two replicas ever run one bucket's work at once.
//
// # Buckets
//
// A shard key is an object's uid or its namespace (fxstore.ShardByUID,
// fxstore.ShardByNamespace). It is hashed with FNV-1a 64-bit, as the API
// server hashes it for a shardSelector (KEP-5866,
// k8s.io/apimachinery/pkg/sharding). Buckets cuts [0, 2^64) into n equal
// ranges, 16 by default:
//
//   - Of gives an object's bucket.
//   - Selector gives the sharding.Selector of a set of buckets: one
//     shardRange per run of contiguous buckets. It selects a replica's
//     share for list and watch, and is evaluated on the client where the
//     server does not.
//
// # Sharded stores and controllers
//
// Module gives an app its *Shards: the replica's Coordinator and what it
// hands buckets to. A module asks for a sharded store with For, by a spec
// and a shard key. It builds its controller with fxcontroller.New, as for
// any store:
//
//	func newController(shards *fxshard.Shards, c client.Client) (*fxcontroller.Controller, error) {
//		configMaps, err := fxshard.For[*corev1.ConfigMap](shards, fxstore.Spec{LabelSelector: "app=x"}, fxstore.ShardByUID)
//		if err != nil {
//			return nil, err
//		}
//		return fxcontroller.New("x", configMaps, &reconciler{configMaps: configMaps, client: c})
//	}
//
// A sharded store is one fxstore store per bucket held, with
// fxstore.Spec.Shard set: the API server sends each only its bucket's
// objects. A bucket's store is asked for when the bucket is acquired, and
// dropped when it is given up. So a bucket moves without the replica
// listing its other buckets again.
//
// Where the API server does not apply shard selectors (Shards.Run asks it
// first), each bucket's store is a view of one store of the whole spec.
// Every object is then received and held once, not once per bucket.
//
// The sharded store is an fxstore.Store. Its reads, informer and health
// are the union of its buckets' stores, and its Key is the whole spec's.
//
// A sharded controller runs on every replica. It:
//
//   - drops requests for keys of buckets it does not hold;
//   - requeues those of a bucket whose store has not synced;
//   - when the replica gives a bucket up, lets no reconcile of its keys
//     start, and waits for those running (Handler.Releasing) before the
//     Lease is given back.
//
// The secondary stores of a sharded controller are ordinary stores, whole
// on every replica: their objects may map to keys of any bucket.
//
// # Coordinator
//
// A Coordinator runs one replica's part. Its group is Config.Name in
// Config.Namespace. The group has Leases, all labelled LeaseLabel=<name>,
// by which each replica watches them:
//
//   - one per bucket, <name>-bucket-<i>;
//   - one per live replica, <name>-member-<identity>.
//
// The timings are those of controller-runtime's leader election:
// LeaseDuration 15s, RenewDeadline 10s, RetryPeriod 2s. The rules are
// client-go's:
//
//   - Renewal. Every RetryPeriod (2s), a replica writes its member Lease
//     and each bucket Lease it holds, at once.
//   - Observation. A replica times the others' Leases on its own clock,
//     from the moment it saw a record change. It never compares their
//     renewTime with its clock, so clock skew does not matter. A Lease
//     whose record has not changed for LeaseDuration (15s) from there has
//     expired. The wait is the longer of this replica's LeaseDuration and
//     the one the holder wrote in the Lease, in whole seconds rounded up.
//   - Membership. The live members are those whose member Lease has not
//     expired, this replica included. A replica deletes its member Lease
//     when it stops. The others delete the member Leases of crashed
//     replicas once expired.
//   - Fair share. With R live members sorted by identity and B buckets,
//     member k's share is B/R, plus one for the first B%R members: 6, 5
//     and 5 of 16 for three members. A replica above its share gives back
//     the surplus. It calls Handler.Releasing; once that returns, it clears
//     the Lease's holder, as client-go releases a Lease, so that another
//     replica takes it at once. A replica below its share takes free
//     buckets: those with no Lease, no holder, or an expired one. It also
//     takes those naming itself: one it drained but could not release. It
//     reads the Lease afresh and writes itself into it with the Lease's
//     resourceVersion, so that of two replicas only one gets it.
//   - Fencing. A holder counts a bucket as held until RenewDeadline (10s)
//     after the start of its last successful renewal. Past it, or as soon
//     as a renewal finds another holder or the Lease deleted, Owns turns
//     false. Releasing is then called, and the holder stops renewing.
//     Renewals may fail from a network partition, say. The others wait
//     LeaseDuration (15s) from when they saw that renewal, which came after
//     its start. So they take the bucket no sooner than LeaseDuration after
//     that start: at least LeaseDuration − RenewDeadline (5s) after the
//     holder called Releasing. Releasing's context ends then. A holder
//     clears a Lease's holder only after Releasing returned. A bucket Lease
//     seen deleted counts as changed then: those who saw it go wait
//     LeaseDuration, while its holder finds out at its next renewal.
//
// What this gives, with the defaults. In brackets are the timings the
// tests run with: LeaseDuration 3s, RenewDeadline 2s, RetryPeriod 250ms.
//
//   - A clean hand-over, to even out the shares or when a replica stops,
//     takes the drain plus a few round trips. The others see the cleared
//     Lease through their watch and take it at once.
//   - A new replica gets its share within a RetryPeriod or two of joining,
//     plus the drains of what the others give back.
//   - A replica that crashes or is cut off keeps its buckets stopped from
//     RenewDeadline (10s [2s]) after its last renewal. The others take them
//     over LeaseDuration (15s [3s]) after they saw that renewal, plus up to
//     a RetryPeriod (2s [250ms]) until they look again: about 17s [3.3s].
//   - A stopping replica (Run's context ended) drains and releases every
//     bucket, deletes its member Lease, and returns once every Releasing
//     has returned. That takes up to LeaseDuration (15s [3s]) plus a
//     request's timeout, when Releasing keeps to its context.
//
// In use, a Handler starts a bucket's work and drains it. The work checks
// Owns, an atomic load, before each piece:
//
//	c, err := fxshard.New(kube, fxshard.HandlerFuncs{
//		AcquiredFunc:  func(bucket int) { /* start the bucket's work */ },
//		ReleasingFunc: func(ctx context.Context, bucket int) { /* stop it; wait for what is in flight */ },
//	}, fxshard.Config{Namespace: "operators", Name: "rollout"})
//	...
//	go c.Run(ctx)
//	...
//	bucket, _ := c.Buckets().Of(obj, fxstore.ShardByUID)
//	if !c.Owns(bucket) {
//		return // another replica's
//	}
//
// Rules for a group:
//
//   - Identities must be unique among the running replicas. A replica takes
//     back at once a bucket whose Lease names its identity.
//   - Every replica of a group must use the same Buckets. Changing it means
//     a new Name.
//   - A replica sends (held buckets + 1) writes every RetryPeriod, and keeps
//     one watch. With the defaults, 16 buckets and any number of replicas
//     cost the API server about 8 writes a second, plus one per replica
//     every 2s. The client's rate limit (rest.Config.QPS, 5 by default in
//     client-go) must leave room for them.
//
// ReadGroup reads a group from its Leases, as the API server has them:
// each bucket's holder and its transitions, and the members with the
// buckets they hold. The app's `describe --cluster` prints it, with the
// objects of each bucket.
package fxshard
