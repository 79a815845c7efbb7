package decode

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
)

// sumSize is the size of a sum: 128 bits.
const sumSize = 16

// A summer sums encodings with GHASH, keyed by a random key of its own,
// through AES-GCM: the tag of an empty message authenticating the
// encoding, under one nonce. The tag is GHASH_H(b) masked by one AES
// block that every sum shares. See the package doc for why two
// encodings a user writes cannot be made to share a sum.
type summer struct {
	gcm   cipher.AEAD
	nonce [12]byte
	buf   [sumSize]byte
}

func newSummer() *summer {
	key := make([]byte, 16)
	_, _ = rand.Read(key) // never fails: see crypto/rand.Read
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // a 16-byte key is always valid
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(err) // AES has GCM's block size
	}
	return &summer{gcm: gcm}
}

// sum returns the sum of b. The caller holds the decoder's lock.
func (s *summer) sum(b []byte) (out [sumSize]byte) {
	copy(out[:], s.gcm.Seal(s.buf[:0], s.nonce[:], nil, b))
	return out
}
