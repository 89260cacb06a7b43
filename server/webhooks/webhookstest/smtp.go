package webhookstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Mail is one message the SMTP server accepted.
type Mail struct {
	From string
	To   []string
	Data []byte
	// User is who authenticated; TLS whether the session had upgraded with STARTTLS
	// before the message.
	User string
	TLS  bool
}

// SMTPServer is a real SMTP server (github.com/emersion/go-smtp) on loopback that
// offers STARTTLS with a certificate of its own CA and AUTH PLAIN, and accepts mail
// only from a session that upgraded and authenticated as User with Password.
type SMTPServer struct {
	Host, Port string
	// CAFile is the PEM file of the CA that signed the server's certificate.
	CAFile         string
	User, Password string

	srv      *smtp.Server
	mu       sync.Mutex
	mails    []Mail
	failNext int
	failCode int
	refused  int
	wake     chan struct{}
}

// FailNext makes the next n messages fail with the reply code after their data is
// sent: 451, a relay briefly unable to take mail; 550, one that never will.
func (s *SMTPServer) FailNext(n, code int) {
	s.mu.Lock()
	s.failNext, s.failCode = n, code
	s.mu.Unlock()
}

// Refused is how many messages FailNext refused.
func (s *SMTPServer) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// NewSMTP starts the server; it stops when the test ends.
func NewSMTP(t testing.TB) *SMTPServer { return newSMTP(t, true) }

// NewSMTPWithoutTLS starts a server that offers no STARTTLS (and takes AUTH in the
// clear): a relay a sender must refuse.
func NewSMTPWithoutTLS(t testing.TB) *SMTPServer { return newSMTP(t, false) }

func newSMTP(t testing.TB, withTLS bool) *SMTPServer {
	t.Helper()
	cert, caPEM := selfSigned(t)
	dir := t.TempDir()
	s := &SMTPServer{CAFile: filepath.Join(dir, "smtp-ca.pem"), User: "agentplane", Password: "s3cret-pw", wake: make(chan struct{}, 1)}
	if err := os.WriteFile(s.CAFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	s.srv = smtp.NewServer(backend{s})
	s.srv.Domain = "127.0.0.1"
	if withTLS {
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	} else {
		s.srv.AllowInsecureAuth = true
	}
	s.srv.MaxMessageBytes = 1 << 20
	s.srv.MaxRecipients = 10
	s.srv.ReadTimeout, s.srv.WriteTimeout = 10*time.Second, 10*time.Second
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Host, s.Port, _ = net.SplitHostPort(lis.Addr().String())
	go func() { _ = s.srv.Serve(lis) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// Mails returns what was accepted so far.
func (s *SMTPServer) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// WaitFor waits up to limit for done to hold over the accepted mail.
func (s *SMTPServer) WaitFor(t testing.TB, limit time.Duration, what string, done func([]Mail) bool) []Mail {
	t.Helper()
	deadline := time.After(limit)
	for {
		if m := s.Mails(); done(m) {
			return m
		}
		select {
		case <-s.wake:
		case <-deadline:
			t.Fatalf("SMTP server: %s: not within %s (got %d messages)", what, limit, len(s.Mails()))
		}
	}
}

type backend struct{ s *SMTPServer }

func (b backend) NewSession(c *smtp.Conn) (smtp.Session, error) { return &session{s: b.s, c: c}, nil }

type session struct {
	s    *SMTPServer
	c    *smtp.Conn
	user string
	m    Mail
}

func (x *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (x *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, user, pw string) error {
		if _, ok := x.c.TLSConnectionState(); !ok && x.c.Server().TLSConfig != nil {
			return errors.New("AUTH before STARTTLS")
		}
		if user != x.s.User || pw != x.s.Password || (identity != "" && identity != user) {
			return smtp.ErrAuthFailed
		}
		x.user = user
		return nil
	}), nil
}

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	if x.user == "" {
		return smtp.ErrAuthRequired
	}
	_, tlsOn := x.c.TLSConnectionState()
	x.m = Mail{From: from, User: x.user, TLS: tlsOn}
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.m.To = append(x.m.To, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	x.m.Data = b
	x.s.mu.Lock()
	if x.s.failNext > 0 {
		x.s.failNext--
		x.s.refused++
		code := x.s.failCode
		x.s.mu.Unlock()
		return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{code / 100, 0, 0}, Message: "refused by the test"}
	}
	x.s.mails = append(x.s.mails, x.m)
	x.s.mu.Unlock()
	select {
	case x.s.wake <- struct{}{}:
	default:
	}
	return nil
}

func (x *session) Reset()        { x.m = Mail{} }
func (x *session) Logout() error { return nil }

// selfSigned makes a CA and a server certificate for 127.0.0.1 signed by it.
func selfSigned(t testing.TB) (tls.Certificate, []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test smtp ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}
