// Package datahash hashes Kubernetes data, such as a ConfigMap's, with
// SHA-256 over an unambiguous encoding: every string is length-prefixed and
// maps are written in key order, so that different data is never encoded
// the same.
package datahash
