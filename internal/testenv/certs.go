package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ServingCertificate returns a new self-signed serving certificate for
// 127.0.0.1, valid for an hour, held only in memory, and the certificate
// in PEM, for a client (an API server's caBundle) to trust.
func ServingCertificate(tb testing.TB) (tls.Certificate, []byte) {
	tb.Helper()
	certPEM, keyPEM := servingCertificate(tb)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	return cert, certPEM
}

// WriteServingCertificate writes a new self-signed serving certificate for
// 127.0.0.1, valid for an hour, and its key to dir/tls.crt and dir/tls.key,
// each file replaced whole, as a certificate rotation writes them. It
// returns the certificate's DER, to compare with what a server presents.
func WriteServingCertificate(tb testing.TB, dir string) []byte {
	tb.Helper()
	certPEM, keyPEM := servingCertificate(tb)
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path+".new", data, 0o600); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			tb.Fatal(err)
		}
	}
	block, _ := pem.Decode(certPEM)
	return block.Bytes
}

// servingCertificate makes a self-signed ECDSA serving certificate for
// 127.0.0.1, valid for an hour, and returns it and its key in PEM.
func servingCertificate(tb testing.TB) (certPEM, keyPEM []byte) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "fxkube-test"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
