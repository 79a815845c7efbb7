package datahash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// A Writer writes length-prefixed values to a SHA-256 hash. Make one with
// New.
type Writer struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

// New returns a Writer of an empty hash.
func New() *Writer { return &Writer{h: sha256.New()} }

// String writes s, after its length.
func (w *Writer) String(s string) {
	w.uint(len(s))
	_, _ = io.WriteString(w.h, s)
}

// Map writes m's length, then each key and value in key order.
func Map[V ~string | ~[]byte](w *Writer, m map[string]V) {
	w.uint(len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		w.String(k)
		w.String(string(m[k]))
	}
}

// ConfigMap writes cm's Data and BinaryData.
func ConfigMap(w *Writer, cm *corev1.ConfigMap) {
	w.String("data")
	Map(w, cm.Data)
	w.String("binaryData")
	Map(w, cm.BinaryData)
}

// Sum returns the hash of what was written, in hex.
func (w *Writer) Sum() string { return hex.EncodeToString(w.h.Sum(nil)) }

func (w *Writer) uint(n int) {
	w.h.Write(w.buf[:binary.PutUvarint(w.buf[:], uint64(n))])
}
