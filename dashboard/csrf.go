package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
)

// The dashboard's CSRF token (a double-submit token): the dashboard's pages
// set it in a cookie that only the broker's own pages send (SameSite=Strict)
// and its script reads, and the script echoes it in the CSRFHeader of every
// state-changing call to the native API. A page of another site can make a
// browser send a request, but can neither read the cookie nor set the
// header, so package server refuses a state-changing request that carries a
// browser's marks (Origin, Sec-Fetch-*) without a matching token (ValidCSRF).
// Programs (curl, the CLI, client libraries) send no browser marks and need
// no token.
const (
	// CSRFCookie is the cookie that holds the token. It is not HttpOnly:
	// the dashboard's script reads it.
	CSRFCookie = "sluice_csrf"
	// CSRFHeader is the header the dashboard's script echoes the token in.
	CSRFHeader = "X-Sluice-CSRF"
)

// csrfTokenLen is the length of a token: 32 random bytes, hex.
const csrfTokenLen = 64

// ValidCSRF reports whether r carries the dashboard's CSRF token: a
// well-formed CSRFCookie and the same value in the CSRFHeader.
func ValidCSRF(r *http.Request) bool {
	c, err := r.Cookie(CSRFCookie)
	if err != nil || !wellFormed(c.Value) {
		return false
	}
	h := r.Header.Get(CSRFHeader)
	return subtle.ConstantTimeCompare([]byte(h), []byte(c.Value)) == 1
}

// setCSRFCookie gives the browser a token when it has none (a token it
// already has is kept, so that several tabs share one). Secure is set when
// the page is served over TLS.
func setCSRFCookie(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(CSRFCookie); err == nil && wellFormed(c.Value) {
		return
	}
	var b [csrfTokenLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	http.SetCookie(w, &http.Cookie{
		Name:     CSRFCookie,
		Value:    hex.EncodeToString(b[:]),
		Path:     "/",
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil,
	})
}

// wellFormed reports whether v has the shape of a token.
func wellFormed(v string) bool {
	if len(v) != csrfTokenLen {
		return false
	}
	_, err := hex.DecodeString(v)
	return err == nil
}
