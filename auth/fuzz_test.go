package auth

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// FuzzAuthenticate feeds the verifier requests built from fuzzed parts
// (method, path and query, Authorization, X-Amz-Date, X-Amz-Target, body).
// It must never panic, every refusal must be one of the authentication
// errors, and an accepted request must carry the signature of one of the
// valid seeds (finding another valid signature would mean forging HMAC).
// Seeds: the valid requests below, and testdata/fuzz/FuzzAuthenticate.
func FuzzAuthenticate(f *testing.F) {
	v, _ := setup(f)
	r, body := jsonRequest(f, testID, testSecret, testNow)
	p := presign(f, testID, testSecret, testNow, 3600e9)
	valid := map[string]bool{}
	sigOf := func(authz, query string) string {
		if i := strings.LastIndex(authz, "Signature="); i >= 0 {
			return authz[i+len("Signature="):]
		}
		q, _ := url.ParseQuery(query)
		return q.Get("X-Amz-Signature")
	}
	valid[sigOf(r.Header.Get("Authorization"), "")] = true
	valid[sigOf("", p.URL.RawQuery)] = true
	f.Add(r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Amz-Date"), r.Header.Get("X-Amz-Target"), body)
	f.Add(p.Method, p.URL.RequestURI(), "", "", "", []byte(nil))
	// The valid seeds pass as the fuzz function builds them.
	for _, seed := range []struct {
		method, uri, authz, date, target string
		body                             []byte
	}{
		{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Amz-Date"), r.Header.Get("X-Amz-Target"), body},
		{p.Method, p.URL.RequestURI(), "", "", "", nil},
	} {
		req, _ := fuzzRequest(seed.method, seed.uri, seed.authz, seed.date, seed.target, seed.body)
		if _, err := v.Authenticate(req, seed.body, true); err != nil {
			f.Fatalf("valid seed %s %s refused: %v", seed.method, seed.uri, err)
		}
	}
	f.Add("GET", "/v1/queues", "Bearer "+testID+":"+testSecret, "", "", []byte(nil))
	f.Add("POST", "/?Action=ListQueues", "AWS4-HMAC-SHA256 Credential=AKIDTEST/20260314/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=00", "20260314T150926Z", "", []byte("x"))

	kinds := []error{model.ErrMissingAuthenticationToken, model.ErrIncompleteSignature, model.ErrInvalidClientTokenID,
		model.ErrSignatureDoesNotMatch, model.ErrRequestExpired}
	f.Fuzz(func(t *testing.T, method, uri, authz, date, target string, body []byte) {
		req, ok := fuzzRequest(method, uri, authz, date, target, body)
		if !ok {
			return
		}
		id, err := v.Authenticate(req, bytes.Clone(body), true)
		if err != nil {
			for _, k := range kinds {
				if errors.Is(err, k) {
					return
				}
			}
			t.Fatalf("refused with an error of no authentication kind: %v", err)
		}
		if id.AccessKeyID != testID {
			t.Fatalf("accepted as %q", id.AccessKeyID)
		}
		if len(authz) > 7 && strings.EqualFold(authz[:7], "Bearer ") {
			return // the secret itself (an auth scheme's name is case-insensitive, RFC 9110)
		}
		if !valid[sigOf(authz, req.URL.RawQuery)] {
			t.Fatalf("accepted a signature no seed has: %s %s %q", method, uri, authz)
		}
	})
}

// fuzzRequest builds a server-side request from the fuzzed parts (ok false
// when the URI does not parse: net/http would refuse it first).
func fuzzRequest(method, uri, authz, date, target string, body []byte) (*http.Request, bool) {
	u, err := url.ParseRequestURI(uri)
	if err != nil || method == "" {
		return nil, false
	}
	req := &http.Request{Method: method, URL: u, Host: "127.0.0.1:9324", Header: http.Header{}, Body: http.NoBody}
	if len(body) > 0 {
		// The body itself is passed apart, as the server does.
		req.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	for name, value := range map[string]string{"Authorization": authz, "X-Amz-Date": date, "X-Amz-Target": target} {
		if value != "" {
			req.Header.Set(name, value)
		}
	}
	return req, true
}
