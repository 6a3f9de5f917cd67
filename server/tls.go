package server

// TLS: when Config.TLSCertFile and TLSKeyFile are set, the server serves
// HTTPS only. The certificate and key are read when the server is made (New
// fails when they do not load or do not match) and again by ReloadTLS
// (sluice serve calls it on SIGHUP): the pair in use is held in an atomic
// pointer that tls.Config.GetCertificate reads for each handshake, so a
// reload takes effect for the next connection, connections already open
// keep theirs, and a reload that fails keeps the pair in use.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// tlsCert is the certificate the server presents; nil when TLS is off.
type tlsCert struct {
	certFile, keyFile string
	pair              atomic.Pointer[tls.Certificate]
}

// loadTLS reads and checks the pair of files: the key must match the
// certificate, and the certificate must parse.
func loadTLS(certFile, keyFile string) (*tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server: TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	if pair.Leaf == nil { // set by LoadX509KeyPair since Go 1.23
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("server: TLS certificate %s: %w", certFile, err)
		}
		pair.Leaf = leaf
	}
	return &pair, nil
}

// AEADCipherSuites are the TLS 1.2 cipher suites the server offers: ECDHE
// key exchange (forward secrecy) with an AEAD cipher only, none of Go's
// default CBC suites with SHA-1 MACs. TLS 1.3's suites, all AEAD, are not
// configurable and stay as Go has them.
var AEADCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// newTLSConfig loads the pair and returns the tls.Config that serves it.
func newTLSConfig(certFile, keyFile string) (*tlsCert, *tls.Config, error) {
	pair, err := loadTLS(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	c := &tlsCert{certFile: certFile, keyFile: keyFile}
	c.pair.Store(pair)
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: AEADCipherSuites,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.pair.Load(), nil
		},
	}
	return c, cfg, nil
}

// ReloadTLS reads Config.TLSCertFile and TLSKeyFile again and, when they
// load and match, serves the new pair from the next TLS handshake on. When
// they do not, the pair in use stays and the error says why (it is logged
// too). It is an error to call it on a server without TLS.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return errors.New("server: TLS is off (no TLSCertFile): nothing to reload")
	}
	pair, err := loadTLS(s.tls.certFile, s.tls.keyFile)
	if err != nil {
		s.log.Error("TLS reload failed; still serving the previous certificate", "err", err)
		return err
	}
	s.tls.pair.Store(pair)
	s.log.Info("TLS certificate reloaded", "subject", pair.Leaf.Subject.String(), "not_after", pair.Leaf.NotAfter.Format(time.RFC3339))
	return nil
}

// validateTLS checks Config's TLS fields: both files or neither.
func validateTLS(c Config) error {
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("server: TLSCertFile and TLSKeyFile go together: give both (a certificate and its key) or neither")
	}
	return nil
}
