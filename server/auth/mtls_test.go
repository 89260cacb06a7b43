package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate and key in PEM.
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage, dns ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMTLS runs a real TLS server built by ServerTLSConfig from files and proves: a
// verified certificate's CN maps to its principal; a verified but unmapped CN is
// UNAUTHENTICATED; a certificate from another CA fails the handshake; a token still
// works on the same listener without a client certificate.
func TestMTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newCA(t, "agentplane test CA"), newCA(t, "someone else")
	srvCert, srvKey := ca.issue(t, "server", x509.ExtKeyUsageServerAuth, "agentplane.test")
	cfg, ts := multiTenantConfig(t)
	cfg.TLS = config.TLS{
		CertFile:     writeFile(t, dir, "server.pem", srvCert),
		KeyFile:      writeFile(t, dir, "server-key.pem", srvKey),
		ClientCAFile: writeFile(t, dir, "ca.pem", ca.pem),
	}
	cfg.Auth.ClientCerts = []config.ClientCert{{CommonName: "runtime-1", Tenant: AllTenants, Roles: []string{"runtime"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := ServerTLSConfig(cfg.TLS)
	if err != nil || serverTLS == nil {
		t.Fatalf("ServerTLSConfig: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := func(issuer *testCA, cn string) credentials.TransportCredentials {
		c := &tls.Config{RootCAs: roots, ServerName: "agentplane.test", MinVersion: tls.VersionTLS12}
		if issuer != nil {
			certPEM, keyPEM := issuer.issue(t, cn, x509.ExtKeyUsageClientAuth)
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			// Always present it, even when the server's acceptable-CA list does not
			// name its issuer (Go's client would otherwise send nothing).
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		}
		return credentials.NewTLS(c)
	}
	lease := rpc{full: agentplanev1.RuntimeService_LeaseTasks_FullMethodName}
	tests := []struct {
		name    string
		issuer  *testCA
		cn      string
		token   string
		want    codes.Code // code seen by the client; Unimplemented means the stub handler ran
		subject string
	}{
		{"mapped CN", ca, "runtime-1", "", codes.Unimplemented, "runtime-1"},
		{"unmapped CN", ca, "stranger", "", codes.Unauthenticated, ""},
		{"other CA", other, "runtime-1", "", codes.Unavailable, ""},
		{"no certificate, no token", nil, "", "", codes.Unauthenticated, ""},
		{"token without certificate", nil, "", ts.runtime, codes.Unimplemented, "fleet"},
		{"token wins over certificate", ca, "runtime-1", ts.user, codes.PermissionDenied, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, g, credentials.NewTLS(serverTLS), client(tt.issuer, tt.cn))
			if got := h.call(t, lease, tt.token); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
			reached := h.reached(lease.full)
			if tt.subject == "" {
				if len(reached) != 0 {
					t.Fatalf("refused call reached the handler")
				}
				return
			}
			if len(reached) != 1 || reached[0] == nil || reached[0].Subject != tt.subject {
				t.Fatalf("handler saw %v, want %s", reached, tt.subject)
			}
		})
	}
}

func TestServerTLSConfig(t *testing.T) {
	if c, err := ServerTLSConfig(config.TLS{}); c != nil || err != nil {
		t.Fatalf("no certificate: got %v, %v; want nil, nil", c, err)
	}
	dir := t.TempDir()
	ca := newCA(t, "ca")
	certPEM, keyPEM := ca.issue(t, "s", x509.ExtKeyUsageServerAuth, "s")
	cert, key := writeFile(t, dir, "c.pem", certPEM), writeFile(t, dir, "k.pem", keyPEM)
	for name, c := range map[string]config.TLS{
		"missing key":   {CertFile: cert, KeyFile: filepath.Join(dir, "nope.pem")},
		"missing CA":    {CertFile: cert, KeyFile: key, ClientCAFile: filepath.Join(dir, "nope.pem")},
		"CA not PEM":    {CertFile: cert, KeyFile: key, ClientCAFile: writeFile(t, dir, "bad.pem", []byte("not pem"))},
		"key not match": {CertFile: cert, KeyFile: cert},
	} {
		if _, err := ServerTLSConfig(c); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}
