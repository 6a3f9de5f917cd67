package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	sclient "github.com/sluicemq/sluice/client"
)

// tlsOptions are the client options of --ca-file: an HTTP client that
// trusts the system's authorities and the ones in the file (a broker served
// with a certificate of a private CA, sluice serve --tls-cert). None
// without --ca-file.
func (c *cli) tlsOptions() ([]sclient.Option, error) {
	if c.caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(c.caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %v", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", c.caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return []sclient.Option{sclient.WithHTTPClient(&http.Client{Timeout: sclient.DefaultTimeout, Transport: tr})}, nil
}

// untrustedCert reports whether err is a TLS handshake's refusal of the
// broker's certificate (an authority not trusted, a name not in it).
func untrustedCert(err error) bool {
	var verr *tls.CertificateVerificationError
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	return errors.As(err, &verr) || errors.As(err, &uerr) || errors.As(err, &herr)
}
