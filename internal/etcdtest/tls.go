package etcdtest

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

// Certs are PEM files of a throwaway certificate authority and the
// certificates it signed, generated with crypto/x509 for one test: a server
// certificate for 127.0.0.1 and localhost, and client certificates. The
// client certificate's common name is what etcd takes as the user name when
// a client authenticates by certificate alone.
type Certs struct {
	Dir        string
	CA         string // the CA certificate
	ServerCert string
	ServerKey  string
	ClientCert string // CN ClientCN
	ClientKey  string
	// OtherCA is a second CA, which signed nothing etcd trusts.
	OtherCA string
	// RogueCert and RogueKey are a client certificate signed by OtherCA.
	RogueCert, RogueKey string
}

// ClientCN is the common name of Certs.ClientCert.
const ClientCN = "shardcron-client"

// GenerateCerts writes a fresh CA, server and client certificates into a
// temporary directory.
func GenerateCerts(t testing.TB) *Certs {
	t.Helper()
	c := &Certs{Dir: t.TempDir()}
	path := func(name string) string { return filepath.Join(c.Dir, name) }
	ca, caKey := newCA(t, "shardcron test CA", path("ca.pem"))
	c.CA = path("ca.pem")
	c.ServerCert, c.ServerKey = path("server.pem"), path("server-key.pem")
	issue(t, ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcd"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, c.ServerCert, c.ServerKey)
	c.ClientCert, c.ClientKey = path("client.pem"), path("client-key.pem")
	issue(t, ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: ClientCN},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, c.ClientCert, c.ClientKey)
	other, otherKey := newCA(t, "someone else's CA", path("other-ca.pem"))
	c.OtherCA = path("other-ca.pem")
	c.RogueCert, c.RogueKey = path("rogue.pem"), path("rogue-key.pem")
	issue(t, other, otherKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "root"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, c.RogueCert, c.RogueKey)
	return c
}

// ClientTLS is a client configuration that trusts the CA and presents the
// client certificate.
func (c *Certs) ClientTLS(t testing.TB) *tls.Config {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(c.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

func nextSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func newCA(t testing.TB, name, certPath string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certPath, "CERTIFICATE", der)
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

func issue(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate, certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = nextSerial()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certPath, "CERTIFICATE", der)
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyPath, "PRIVATE KEY", kb)
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
