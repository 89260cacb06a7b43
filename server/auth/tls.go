package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/agentplane/agentplane/server/config"
)

// ServerTLSConfig builds the server's TLS configuration from the tls section, or
// returns nil, nil when no certificate is configured (plain TCP; config.Validate has
// already refused that where it is unsafe). With client_ca_file, client certificates
// are verified against it when presented (VerifyClientCertIfGiven), so token callers
// and certificate callers can share one listener; a certificate that does not verify
// fails the handshake.
func ServerTLSConfig(c config.TLS) (*tls.Config, error) {
	if c.CertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: server certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("tls: client_ca_file holds no PEM certificate")
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}
