package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
)

const (
	testID     = "AKIDTEST"
	testSecret = "secret-key-of-the-test"
	testAcct   = "123456789012"
)

var testNow = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// setup returns a verifier of one key allowed everything, on a fake clock
// at testNow, and the clock.
func setup(t testing.TB, extra ...Key) (*Verifier, *clocktest.FakeClock) {
	t.Helper()
	keys, err := NewKeys(append([]Key{{AccessKeyID: testID, SecretAccessKey: testSecret, Account: testAcct, Allow: []string{"*"}}}, extra...))
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktest.NewFakeClock(testNow)
	return NewVerifier(keys, clock), clock
}

func payloadHash(body []byte) string {
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:])
}

// jsonRequest is a SendMessage in AWS JSON, signed by aws-sdk-go-v2's
// signer with id/secret at when.
func jsonRequest(t testing.TB, id, secret string, when time.Time) (*http.Request, []byte) {
	t.Helper()
	body := []byte(`{"QueueUrl":"http://127.0.0.1:9324/123456789012/orders","MessageBody":"hello"}`)
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9324/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/x-amz-json-1.0")
	r.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	sign(t, r, body, id, secret, "sqs", when)
	return r, body
}

func sign(t testing.TB, r *http.Request, body []byte, id, secret, service string, when time.Time) {
	t.Helper()
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}, r, payloadHash(body), service, "us-east-1", when)
	if err != nil {
		t.Fatal(err)
	}
}

// presign returns a presigned query-protocol GET.
func presign(t testing.TB, id, secret string, when time.Time, expires time.Duration) *http.Request {
	t.Helper()
	q := url.Values{"Action": {"ReceiveMessage"}, "QueueUrl": {"http://127.0.0.1:9324/123456789012/orders"}, "X-Amz-Expires": {fmtSecs(expires)}}
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9324/123456789012/orders?"+q.Encode(), nil)
	u, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}, r, payloadHash(nil), "sqs", "us-east-1", when)
	if err != nil {
		t.Fatal(err)
	}
	return httptest.NewRequest(http.MethodGet, u, nil)
}

func fmtSecs(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

func wantKind(t *testing.T, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("err = %v, want %v", err, kind)
	}
}

func TestHeaderSignature(t *testing.T) {
	v, _ := setup(t)
	r, body := jsonRequest(t, testID, testSecret, testNow)
	id, err := v.Authenticate(r, body, false)
	if err != nil {
		t.Fatal(err)
	}
	if id.AccessKeyID != testID || id.Account != testAcct || !id.Allowed("SendMessage") {
		t.Fatalf("identity %+v", id)
	}
	if id.ARN() != "arn:aws:iam::123456789012:user/AKIDTEST" {
		t.Fatal(id.ARN())
	}
}

func TestErrors(t *testing.T) {
	v, _ := setup(t)
	cases := []struct {
		name string
		req  func() (*http.Request, []byte)
		kind error
	}{
		{"unsigned", func() (*http.Request, []byte) {
			return httptest.NewRequest(http.MethodGet, "http://h/?Action=ListQueues", nil), nil
		}, model.ErrMissingAuthenticationToken},
		{"wrong secret", func() (*http.Request, []byte) { return jsonRequest(t, testID, "not-the-secret", testNow) }, model.ErrSignatureDoesNotMatch},
		{"unknown key", func() (*http.Request, []byte) { return jsonRequest(t, "AKIDOTHER", testSecret, testNow) }, model.ErrInvalidClientTokenID},
		{"6 min old", func() (*http.Request, []byte) { return jsonRequest(t, testID, testSecret, testNow.Add(-6*time.Minute)) }, model.ErrRequestExpired},
		{"6 min ahead", func() (*http.Request, []byte) { return jsonRequest(t, testID, testSecret, testNow.Add(6*time.Minute)) }, model.ErrRequestExpired},
		{"body changed", func() (*http.Request, []byte) {
			r, body := jsonRequest(t, testID, testSecret, testNow)
			return r, bytes.Replace(body, []byte("hello"), []byte("HELLO"), 1)
		}, model.ErrSignatureDoesNotMatch},
		{"target unsigned", func() (*http.Request, []byte) {
			r, body := jsonRequest(t, testID, testSecret, testNow)
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", strings.Replace(a, ";x-amz-target", "", 1))
			return r, body
		}, model.ErrIncompleteSignature},
		{"target changed", func() (*http.Request, []byte) {
			r, body := jsonRequest(t, testID, testSecret, testNow)
			r.Header.Set("X-Amz-Target", "AmazonSQS.PurgeQueue")
			return r, body
		}, model.ErrSignatureDoesNotMatch},
		{"other scheme", func() (*http.Request, []byte) {
			r := httptest.NewRequest(http.MethodGet, "http://h/", nil)
			r.Header.Set("Authorization", "Basic dXNlcjpwYXNz")
			return r, nil
		}, model.ErrIncompleteSignature},
		{"bearer off", func() (*http.Request, []byte) {
			r := httptest.NewRequest(http.MethodGet, "http://h/", nil)
			r.Header.Set("Authorization", "Bearer "+testID+":"+testSecret)
			return r, nil
		}, model.ErrIncompleteSignature},
		{"no signature part", func() (*http.Request, []byte) {
			r, body := jsonRequest(t, testID, testSecret, testNow)
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", a[:strings.Index(a, ", Signature=")])
			return r, body
		}, model.ErrIncompleteSignature},
		{"no date", func() (*http.Request, []byte) {
			r, body := jsonRequest(t, testID, testSecret, testNow)
			r.Header.Del("X-Amz-Date")
			return r, body
		}, model.ErrIncompleteSignature},
		{"scope date", func() (*http.Request, []byte) {
			r, body := jsonRequest(t, testID, testSecret, testNow)
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/20260314/", "/20260313/", 1))
			return r, body
		}, model.ErrSignatureDoesNotMatch},
		{"service", func() (*http.Request, []byte) {
			r, body := jsonRequest(t, testID, testSecret, testNow)
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/sqs/", "/s3/", 1))
			return r, body
		}, model.ErrIncompleteSignature},
		{"header and query", func() (*http.Request, []byte) {
			r, body := jsonRequest(t, testID, testSecret, testNow)
			r.URL.RawQuery = "X-Amz-Signature=00"
			return r, body
		}, model.ErrIncompleteSignature},
		{"presigned expired", func() (*http.Request, []byte) {
			return presign(t, testID, testSecret, testNow.Add(-2*time.Hour), time.Hour), nil
		}, model.ErrRequestExpired},
		{"presigned future", func() (*http.Request, []byte) {
			return presign(t, testID, testSecret, testNow.Add(10*time.Minute), time.Hour), nil
		}, model.ErrRequestExpired},
		{"presigned too long", func() (*http.Request, []byte) {
			return presign(t, testID, testSecret, testNow, 8*24*time.Hour), nil
		}, model.ErrIncompleteSignature},
		{"presigned wrong secret", func() (*http.Request, []byte) {
			return presign(t, testID, "not-the-secret", testNow, time.Hour), nil
		}, model.ErrSignatureDoesNotMatch},
		{"presigned with a body", func() (*http.Request, []byte) {
			r := presign(t, testID, testSecret, testNow, time.Hour)
			return r, []byte("Action=PurgeQueue")
		}, model.ErrSignatureDoesNotMatch},
		{"presigned missing part", func() (*http.Request, []byte) {
			r := presign(t, testID, testSecret, testNow, time.Hour)
			q := r.URL.Query()
			q.Del("X-Amz-SignedHeaders")
			r.URL.RawQuery = q.Encode()
			return r, nil
		}, model.ErrIncompleteSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, body := c.req()
			_, err := v.Authenticate(r, body, false)
			wantKind(t, err, c.kind)
			if model.ErrorMessage(err) == "" {
				t.Fatal("no message")
			}
		})
	}
}

func TestSkewWindow(t *testing.T) {
	v, _ := setup(t)
	for _, d := range []time.Duration{-MaxSkew, -MaxSkew + time.Second, 0, MaxSkew - time.Second, MaxSkew} {
		r, body := jsonRequest(t, testID, testSecret, testNow.Add(d))
		if _, err := v.Authenticate(r, body, false); err != nil {
			t.Fatalf("skew %v: %v", d, err)
		}
	}
}

func TestPresigned(t *testing.T) {
	v, clock := setup(t)
	r := presign(t, testID, testSecret, testNow, time.Hour)
	if _, err := v.Authenticate(r, nil, false); err != nil {
		t.Fatal(err)
	}
	clock.Advance(59 * time.Minute)
	if _, err := v.Authenticate(r, nil, false); err != nil {
		t.Fatalf("within its expiry: %v", err)
	}
	clock.Advance(2 * time.Minute)
	_, err := v.Authenticate(r, nil, false)
	wantKind(t, err, model.ErrRequestExpired)

	// A presigned request with UNSIGNED-PAYLOAD and no body (some signers).
	q := url.Values{"Action": {"ListQueues"}, "X-Amz-Expires": {"60"}}
	r = httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9324/?"+q.Encode(), nil)
	u, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: testID, SecretAccessKey: testSecret}, r, unsignedPayload, "sqs", "eu-west-1", clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Authenticate(httptest.NewRequest(http.MethodGet, u, nil), nil, false); err != nil {
		t.Fatalf("UNSIGNED-PAYLOAD: %v", err)
	}
}

func TestBearer(t *testing.T) {
	v, _ := setup(t, Key{AccessKeyID: "reader", SecretAccessKey: "reader-secret", Account: "000000000001", Allow: []string{"read-only"}})
	r := httptest.NewRequest(http.MethodGet, "http://h/v1/queues", nil)
	r.Header.Set("Authorization", "Bearer reader:reader-secret")
	id, err := v.Authenticate(r, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if id.Account != "000000000001" || !id.Allowed(NativeRead) || id.Allowed(NativeWrite) || id.Allowed("ReceiveMessage") || !id.Allowed("ListQueues") {
		t.Fatalf("identity %+v", id)
	}
	wantKind(t, id.DeniedError("SendMessage"), model.ErrKeyNotAllowed)
	for token, kind := range map[string]error{
		"reader:wrong-secret":  model.ErrSignatureDoesNotMatch,
		"nobody:reader-secret": model.ErrInvalidClientTokenID,
		"reader":               model.ErrIncompleteSignature,
		":":                    model.ErrIncompleteSignature,
	} {
		r.Header.Set("Authorization", "Bearer "+token)
		_, err := v.Authenticate(r, nil, true)
		wantKind(t, err, kind)
	}
}

// TestVectors checks the verifier against requests of AWS's published
// Signature Version 4 test suite (get-vanilla, get-vanilla-query-order-key-case
// style query, and the IAM ListUsers example of the signing guide).
func TestVectors(t *testing.T) {
	keys, err := NewKeys([]Key{{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", Account: testAcct, Allow: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(keys, clocktest.NewFakeClock(time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)))
	v.services["service"], v.services["iam"] = true, true
	cases := []struct {
		name, url, service, signedHeaders, signature string
		headers                                      map[string]string
	}{
		{"get-vanilla", "http://example.amazonaws.com/", "service", "host;x-amz-date",
			"5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31", nil},
		{"iam-listusers", "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", "iam", "content-type;host;x-amz-date",
			"5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, c.url, nil)
			for k, val := range c.headers {
				r.Header.Set(k, val)
			}
			r.Header.Set("X-Amz-Date", "20150830T123600Z")
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/"+c.service+"/aws4_request, SignedHeaders="+c.signedHeaders+", Signature="+c.signature)
			if _, err := v.Authenticate(r, nil, false); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseKeys(t *testing.T) {
	good := `[{"accessKeyId":"AKID1","secretAccessKey":"12345678","account":"123456789012","allow":["SendMessage","native:read"]}]`
	if _, err := ParseKeys([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		``, `{}`, `[]`, good + `x`,
		`[{"accessKeyId":"","secretAccessKey":"12345678","account":"123456789012","allow":["*"]}]`,
		`[{"accessKeyId":"a b","secretAccessKey":"12345678","account":"123456789012","allow":["*"]}]`,
		`[{"accessKeyId":"A","secretAccessKey":"short","account":"123456789012","allow":["*"]}]`,
		`[{"accessKeyId":"A","secretAccessKey":"12345678","account":"12345","allow":["*"]}]`,
		`[{"accessKeyId":"A","secretAccessKey":"12345678","account":"123456789012","allow":[]}]`,
		`[{"accessKeyId":"A","secretAccessKey":"12345678","account":"123456789012","allow":["SendMesage"]}]`,
		`[{"accessKeyId":"A","secretAccessKey":"12345678","account":"123456789012","allow":["*"],"extra":1}]`,
		`[{"accessKeyId":"A","secretAccessKey":"12345678","account":"123456789012","allow":["*"]},{"accessKeyId":"A","secretAccessKey":"12345678","account":"123456789012","allow":["*"]}]`,
	} {
		if _, err := ParseKeys([]byte(bad)); err == nil {
			t.Errorf("ParseKeys(%s) accepted", bad)
		}
	}
}

func TestReloadKeepsOldKeysOnError(t *testing.T) {
	path := t.TempDir() + "/keys.json"
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"accessKeyId":"A","secretAccessKey":"12345678","account":"123456789012","allow":["*"]}]`)
	k, err := LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	write(`[{"accessKeyId":"B","secretAccessKey":"12345678","account":"123456789012","allow":["*"]}]`)
	if err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	if ids := k.IDs(); len(ids) != 1 || ids[0] != "B" {
		t.Fatalf("after reload: %v", ids)
	}
	write(`[{"accessKeyId":"C"`)
	if err := k.Reload(); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("bad file: %v", err)
	}
	if ids := k.IDs(); len(ids) != 1 || ids[0] != "B" {
		t.Fatalf("a bad file changed the keys: %v", ids)
	}
}
