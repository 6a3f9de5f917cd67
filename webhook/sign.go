package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader is the header that carries a payload's signature:
//
//	Sluice-Signature: t=1717243200,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd
//
// t is the Unix time of the call in seconds, and v1 the lower-case hex
// HMAC-SHA256 of "<t>.<body>" under the shared secret (Sign). A receiver
// recomputes it over the raw body it read, compares in constant time, and
// refuses a t too far from its own clock (a replayed call): Verify does.
const SignatureHeader = "Sluice-Signature"

// Sign is the v1 signature of body sent at Unix time t under secret: the
// lower-case hex HMAC-SHA256 of "<t>.<body>".
func Sign(secret []byte, t int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(t, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// signatureValue is the SignatureHeader value of body sent at t.
func signatureValue(secret []byte, t int64, body []byte) string {
	return fmt.Sprintf("t=%d,v1=%s", t, Sign(secret, t, body))
}

// The errors of Verify.
var (
	// ErrNoSignature: the header is missing or has no t or v1.
	ErrNoSignature = errors.New("webhook: no Sluice-Signature (t=...,v1=...)")
	// ErrBadSignature: no v1 matches the body under the secret.
	ErrBadSignature = errors.New("webhook: the signature does not match the body")
	// ErrStale: t is further than the tolerance from now.
	ErrStale = errors.New("webhook: the signature's timestamp is outside the tolerance")
)

// Verify checks a SignatureHeader value against the raw body a receiver
// read: some v1 must be Sign(secret, t, body) (compared in constant time),
// and t within tolerance of now (tolerance <= 0: 5 minutes). A receiver in
// Go may call it; the docs show the same check without this package.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = 5 * time.Minute
	}
	var t int64
	var haveT bool
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return ErrNoSignature
			}
			t, haveT = n, true
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if !haveT || len(sigs) == 0 {
		return ErrNoSignature
	}
	if d := now.Sub(time.Unix(t, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	want := []byte(Sign(secret, t, body))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), want) {
			return nil
		}
	}
	return ErrBadSignature
}
