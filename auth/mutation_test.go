package auth

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// wire is a request as bytes on the wire: the parts a signature covers.
type wire struct {
	method, host, path, query string
	headers                   map[string]string // canonical header name -> value
	body                      string
}

// toWire captures r (signed) and its body.
func toWire(r *http.Request, body []byte) wire {
	w := wire{method: r.Method, host: r.Host, path: r.URL.EscapedPath(), query: r.URL.RawQuery, headers: map[string]string{}, body: string(body)}
	for k := range r.Header {
		w.headers[k] = r.Header.Get(k)
	}
	if r.ContentLength > 0 {
		// As net/http's server keeps it in the request's headers.
		w.headers["Content-Length"] = strconv.FormatInt(r.ContentLength, 10)
	}
	return w
}

// request builds the request again; ok is false when the bytes no longer
// make an HTTP request (net/http would refuse it before any handler).
func (w wire) request() (*http.Request, bool) {
	u, err := url.Parse("http://" + w.host + w.path + "?" + w.query)
	if err != nil || u.Host != w.host {
		return nil, false
	}
	if w.query == "" {
		u.RawQuery, u.ForceQuery = "", false
	}
	r := &http.Request{Method: w.method, URL: u, Host: w.host, Header: http.Header{}, Body: http.NoBody}
	for k, v := range w.headers {
		r.Header.Set(k, v)
	}
	return r, true
}

// TestMutationsRefused changes one byte of a signed part of a valid request
// (the method, host, path, query, a signed header, the body, the
// Authorization header with its signature), 1,000 times over a header-signed
// query-protocol POST and a presigned GET, and checks that the verifier
// refuses every one. The only mutations skipped are those that leave the
// request meaning the same bytes to the server: the case of a hex digit in a
// %XX escape.
func TestMutationsRefused(t *testing.T) {
	v, _ := setup(t)
	// A query-protocol POST with a query string, signed in the header
	// (content-type signed too, as the SDKs sign it).
	body := []byte("Action=SendMessage&MessageBody=hello-world&Version=2012-11-05")
	r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:9324/123456789012/orders?Version=2012-11-05&Extra=x", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	r.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	sign(t, r, body, testID, testSecret, "sqs", testNow)
	bases := []wire{toWire(r, body), toWire(presign(t, testID, testSecret, testNow, 3600e9), nil)}
	for _, b := range bases {
		req, _ := b.request()
		if _, err := v.Authenticate(req, []byte(b.body), false); err != nil {
			t.Fatalf("the unmutated request is refused: %v", err)
		}
	}

	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{"method", "host", "path", "query", "header", "body"}
	done, skipped := 0, 0
	byPart := map[string]int{}
	for done < 1000 {
		w := bases[rng.IntN(len(bases))]
		w.headers = clone(w.headers)
		part := parts[rng.IntN(len(parts))]
		var target *string
		switch part {
		case "method":
			target = &w.method
		case "host":
			target = &w.host
		case "path":
			target = &w.path
		case "query":
			target = &w.query
		case "body":
			target = &w.body
		case "header":
			// Only signed headers, and Authorization (the signature).
			names := []string{"Authorization", "Content-Type", "Content-Length", "X-Amz-Target", "X-Amz-Date"}
			name := names[rng.IntN(len(names))]
			val, ok := w.headers[name]
			if !ok {
				continue
			}
			part = "header " + name
			i, c, ok := mutate(rng, val)
			if !ok {
				continue
			}
			w.headers[name] = val[:i] + string(c) + val[i+1:]
			target = nil
		}
		if target != nil {
			i, c, ok := mutate(rng, *target)
			if !ok {
				continue // an empty part (a presigned GET's body)
			}
			if (part == "query" || part == "path") && equivalent(*target, i, c) {
				skipped++
				continue
			}
			*target = (*target)[:i] + string(c) + (*target)[i+1:]
		}
		done++
		byPart[part]++
		req, ok := w.request()
		if !ok {
			continue // refused by HTTP parsing already
		}
		if id, err := v.Authenticate(req, []byte(w.body), false); err == nil {
			t.Errorf("mutation of %s accepted (identity %s): %+v", part, id.AccessKeyID, w)
		}
	}
	t.Logf("1000 mutations refused (%d equivalent ones skipped); by part: %v", skipped, byPart)
}

func clone(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// mutate picks a byte of s and a different value for it.
func mutate(rng *rand.Rand, s string) (int, byte, bool) {
	if s == "" {
		return 0, 0, false
	}
	i := rng.IntN(len(s))
	for {
		c := byte(rng.IntN(256))
		if c != s[i] {
			return i, c, true
		}
	}
}

// equivalent reports whether setting s[i] to c only changes the case of a
// hex digit of a %XX escape (the same bytes after unescaping).
func equivalent(s string, i int, c byte) bool {
	inEscape := i >= 1 && s[i-1] == '%' || i >= 2 && s[i-2] == '%'
	return inEscape && strings.EqualFold(string(s[i]), string(c)) && isHex(c)
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
