// Package decode decodes the protobuf encodings of a store's objects,
// decoding once what repeats.
//
// A [Decoder] cuts an object's encoding into its fields without
// decoding them. A field whose bytes it has seen before takes the part
// already decoded for them, canonical in the store's share.Table: it is
// neither decoded nor walked by the table again. Only new parts are
// decoded, with the generated code, and then shared as the table shares
// any object. A [Serializer] plugs a decoder into a REST client, for
// lists, streamed lists and watches alike. It leaves each watch event's
// object in the frame it came in, rather than copying it out first.
//
// # What is reused
//
//   - An update's top-level fields (a Pod's spec and status) whose bytes
//     equal those of the object it replaces take that object's fields.
//   - Any message, list of messages or map, at any depth, whose bytes
//     equal those of a part seen in two objects before takes that part:
//     the replicas of a Deployment share their probes, env and volumes.
//   - The object's managedFields, which the store's transform drops, are
//     not decoded at all (WithoutManagedFields).
//
// # Exactness
//
// A decoded object deep-equals what the generated code makes from the
// same bytes, and the transform then leaves:
//
//   - Fields are decoded apart only where the generated code would
//     decode them alone: a message type whose every field is in its
//     encoding, each such field in one run, a message held once seen
//     once. Any other encoding is decoded whole by the generated code,
//     which then also gives its errors.
//   - Parts are reused by equal bytes of the same Go type: equal bytes
//     decode to equal values.
//   - The index of parts seen compares bytes exactly: it is a Go map
//     keyed by the bytes.
//   - An update's fields are compared by a 128-bit sum: GHASH, keyed by
//     a random AES key per decoder, through crypto/cipher's GCM (the tag
//     of an empty message under a fixed nonce).
//
// GHASH is a universal hash. Two different encodings of at most L
// blocks of 16 bytes share a sum with probability at most (L+1)/2^128
// over the key. The key and the sums never leave the process. So a user
// writing objects learns nothing of them, and each object they write
// collides with that probability, however they choose it. Two 64-bit
// hash/maphash values would not do: maphash is not a keyed universal
// hash, and inputs that collide for every seed would collide for both.
//
// managedFields left undecoded are only checked to be framed. An
// encoding whose managedFields hold values the generated code rejects
// decodes without error.
//
// # Bounds
//
// What a decoder keeps is counted in the store's bytes, and released
// with the parts:
//
//   - its index holds a part once seen in two objects; it is cleared
//     each time the table rebuilds, and once it holds half of what the
//     table holds;
//   - a record per object, its sums, goes when the object is deleted;
//   - with no object left, it holds nothing.
//
// # Contract
//
// Objects decoded share parts before any transform runs. Only a
// transform that changes no part may run on them: fxstore's
// StripManagedFields, or none.
package decode
