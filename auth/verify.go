package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The limits of a signature's time.
const (
	// MaxSkew is how far a signed request's date (X-Amz-Date) may be from
	// the broker's clock, either way.
	MaxSkew = 5 * time.Minute
	// MaxExpires is the longest X-Amz-Expires of a presigned request: 7 days.
	MaxExpires = 7 * 24 * time.Hour
)

// algorithm is the only SigV4 algorithm verified (SigV4A is not).
const algorithm = "AWS4-HMAC-SHA256"

// unsignedPayload is the payload hash some signers put in a presigned
// request; it is accepted only for a presigned request without a body.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// amzDate is the layout of X-Amz-Date.
const amzDate = "20060102T150405Z"

// Identity is who a verified request comes from.
type Identity struct {
	// AccessKeyID is the verified key's id.
	AccessKeyID string
	// Account is the key's account (12 digits).
	Account string
	key     *key
}

// Allowed reports whether the identity's key may do action (an SQS action
// name, NativeRead or NativeWrite).
func (id Identity) Allowed(action string) bool { return id.key != nil && id.key.allowed(action) }

// ARN is the identity's ARN as GetCallerIdentity answers it: an IAM user
// named after the access key id.
func (id Identity) ARN() string { return "arn:aws:iam::" + id.Account + ":user/" + id.AccessKeyID }

// DeniedError is the error for an identity whose key may not do action.
func (id Identity) DeniedError(action string) error {
	return model.Errorf(model.ErrKeyNotAllowed, "User: %s is not authorized to perform: %s (the key's allow list in the keys file does not include it).", id.ARN(), permissionName(action))
}

func permissionName(action string) string {
	if strings.HasPrefix(action, "native:") {
		return action
	}
	return "sqs:" + action
}

// Verifier checks requests against Keys: AWS Signature Version 4 in the
// Authorization header or in a presigned query, and the native API's
// bearer token. Safe for concurrent use.
type Verifier struct {
	keys  *Keys
	clock model.Clock
	// services are the services a credential's scope may name.
	services map[string]bool
}

// NewVerifier returns a Verifier of keys on clock (nil: the real clock).
func NewVerifier(keys *Keys, clock model.Clock) *Verifier {
	if clock == nil {
		clock = model.RealClock{}
	}
	return &Verifier{keys: keys, clock: clock, services: map[string]bool{"sqs": true, "sts": true}}
}

// Authenticate verifies r, whose body the caller has read (with its body
// cap) and passes as body: the payload hash is computed here from body,
// never taken from the request. bearer allows the native API's
// "Authorization: Bearer ID:SECRET" besides SigV4. The error is a
// *model.Error of one of the authentication sentinels.
//
// What is checked (docs/security.md): the algorithm, the credential's scope
// (date of X-Amz-Date, any region, service sqs or sts, aws4_request), that
// host, x-amz-date (header form) and x-amz-target (when the request has
// one, so that a captured request cannot be replayed as another action) are
// signed, the date within MaxSkew of the clock (a presigned request: not
// before its date less MaxSkew, not after its date plus X-Amz-Expires, at
// most MaxExpires), and the signature over the canonical request built
// here, compared in constant time.
func (v *Verifier) Authenticate(r *http.Request, body []byte, bearer bool) (Identity, error) {
	authz := r.Header.Values("Authorization")
	if len(authz) > 1 {
		return Identity{}, incomplete("The request has more than one Authorization header.")
	}
	q := r.URL.Query()
	presigned := q.Has("X-Amz-Signature") || q.Has("X-Amz-Algorithm") || q.Has("X-Amz-Credential")
	if len(authz) == 0 || authz[0] == "" {
		if presigned {
			return v.presigned(r, body)
		}
		return Identity{}, model.Errorf(model.ErrMissingAuthenticationToken, "Request is missing Authentication Token: this broker has access keys, so sign requests with AWS Signature Version 4 (the native API also takes Authorization: Bearer ID:SECRET).")
	}
	if presigned {
		return Identity{}, incomplete("Only one authentication mechanism is allowed: the Authorization header or the X-Amz-* query parameters, not both.")
	}
	scheme, rest, _ := strings.Cut(authz[0], " ")
	switch {
	case scheme == algorithm:
		return v.header(r, body, rest)
	case bearer && strings.EqualFold(scheme, "Bearer"):
		return v.bearer(strings.TrimSpace(rest))
	}
	return Identity{}, incomplete("Authorization scheme %q is not supported: use %s (the native API also takes Bearer).", truncate(scheme, 32), algorithm)
}

// Bearer verifies the value of an authorization that must be a bearer
// token, "Bearer ID:SECRET" (the stream API's "authorization" metadata).
func (v *Verifier) Bearer(authorization string) (Identity, error) {
	if authorization == "" {
		return Identity{}, model.Errorf(model.ErrMissingAuthenticationToken, "Request is missing Authentication Token: this broker has access keys, so send authorization: Bearer ACCESS_KEY_ID:SECRET_ACCESS_KEY.")
	}
	scheme, rest, _ := strings.Cut(authorization, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return Identity{}, incomplete("Authorization scheme %q is not supported here: use Bearer ACCESS_KEY_ID:SECRET_ACCESS_KEY.", truncate(scheme, 32))
	}
	return v.bearer(strings.TrimSpace(rest))
}

// bearer verifies "ID:SECRET".
func (v *Verifier) bearer(token string) (Identity, error) {
	id, secret, ok := strings.Cut(token, ":")
	if !ok || id == "" || secret == "" {
		return Identity{}, incomplete("A bearer token must be ACCESS_KEY_ID:SECRET_ACCESS_KEY.")
	}
	k := v.keys.lookup(id)
	if k == nil {
		return Identity{}, unknownKey()
	}
	// Hashes first: equal lengths, so the comparison's time says nothing
	// about the secret's length either.
	given, want := sha256.Sum256([]byte(secret)), sha256.Sum256([]byte(k.SecretAccessKey))
	if !hmac.Equal(given[:], want[:]) {
		return Identity{}, model.Errorf(model.ErrSignatureDoesNotMatch, "The bearer token's secret is not the key's secret access key.")
	}
	return Identity{AccessKeyID: k.AccessKeyID, Account: k.Account, key: k}, nil
}

// signed is what a SigV4 request claims, from its header or its query.
type signed struct {
	credential    string
	signedHeaders string
	signature     string
	date          string
	// expires is X-Amz-Expires of a presigned request (0 in header form).
	expires time.Duration
	// presigned: the query form (X-Amz-Signature is left out of the
	// canonical query).
	presigned bool
}

// header verifies the header form: "AWS4-HMAC-SHA256 Credential=...,
// SignedHeaders=..., Signature=...".
func (v *Verifier) header(r *http.Request, body []byte, params string) (Identity, error) {
	var s signed
	seen := map[string]bool{}
	for _, part := range strings.Split(params, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || seen[name] {
			return Identity{}, incomplete("The Authorization header is malformed: %q is not one of Credential=, SignedHeaders=, Signature= (each once).", truncate(strings.TrimSpace(part), 40))
		}
		seen[name] = true
		switch name {
		case "Credential":
			s.credential = value
		case "SignedHeaders":
			s.signedHeaders = value
		case "Signature":
			s.signature = value
		default:
			return Identity{}, incomplete("The Authorization header is malformed: unknown part %q.", truncate(name, 40))
		}
	}
	if s.credential == "" || s.signedHeaders == "" || s.signature == "" {
		return Identity{}, incomplete("Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.")
	}
	s.date = r.Header.Get("X-Amz-Date")
	if s.date == "" {
		return Identity{}, incomplete("Authorization header requires an 'X-Amz-Date' header.")
	}
	if !hasName(s.signedHeaders, "x-amz-date") {
		return Identity{}, incomplete("The signed headers must include x-amz-date.")
	}
	return v.verify(r, body, s)
}

// presigned verifies the query form (X-Amz-Algorithm, X-Amz-Credential,
// X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders, X-Amz-Signature).
func (v *Verifier) presigned(r *http.Request, body []byte) (Identity, error) {
	q := r.URL.Query()
	for _, p := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		if len(q[p]) != 1 || q.Get(p) == "" {
			return Identity{}, incomplete("A presigned request needs the query parameter %s, once.", p)
		}
	}
	if a := q.Get("X-Amz-Algorithm"); a != algorithm {
		return Identity{}, incomplete("X-Amz-Algorithm %q is not supported: use %s.", truncate(a, 32), algorithm)
	}
	secs, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || secs < 1 || time.Duration(secs)*time.Second > MaxExpires {
		return Identity{}, incomplete("X-Amz-Expires must be 1..%d seconds.", int(MaxExpires/time.Second))
	}
	s := signed{
		credential: q.Get("X-Amz-Credential"), signedHeaders: q.Get("X-Amz-SignedHeaders"),
		signature: q.Get("X-Amz-Signature"), date: q.Get("X-Amz-Date"),
		expires: time.Duration(secs) * time.Second, presigned: true,
	}
	return v.verify(r, body, s)
}

// verify checks the credential, the time and the signature of s.
func (v *Verifier) verify(r *http.Request, body []byte, s signed) (Identity, error) {
	parts := strings.Split(s.credential, "/")
	if len(parts) != 5 || parts[0] == "" || parts[2] == "" || parts[4] != "aws4_request" {
		return Identity{}, incomplete("Credential %q must be ACCESS_KEY_ID/YYYYMMDD/REGION/SERVICE/aws4_request.", truncate(s.credential, 128))
	}
	id, day, region, service := parts[0], parts[1], parts[2], parts[3]
	if !v.services[service] {
		return Identity{}, incomplete("Credential should be scoped to a valid service: sqs or sts, not %q.", truncate(service, 32))
	}
	for _, h := range []string{"host"} {
		if !hasName(s.signedHeaders, h) {
			return Identity{}, incomplete("The signed headers must include %s.", h)
		}
	}
	if r.Header.Get("X-Amz-Target") != "" && !hasName(s.signedHeaders, "x-amz-target") {
		return Identity{}, incomplete("The signed headers must include x-amz-target when the request has an X-Amz-Target header.")
	}
	t, err := time.Parse(amzDate, s.date)
	if err != nil {
		return Identity{}, incomplete("X-Amz-Date %q must be YYYYMMDD'T'HHMMSS'Z'.", truncate(s.date, 32))
	}
	k := v.keys.lookup(id)
	if k == nil {
		return Identity{}, unknownKey()
	}
	if day != s.date[:8] {
		return Identity{}, mismatch("Date in Credential scope does not match YYYYMMDD from X-Amz-Date.")
	}
	now := v.clock.Now().UTC()
	switch {
	case t.After(now.Add(MaxSkew)):
		return Identity{}, model.Errorf(model.ErrRequestExpired, "Signature not yet current: %s is still later than %s (%s + %v).", s.date, now.Add(MaxSkew).Format(amzDate), now.Format(amzDate), MaxSkew)
	case s.presigned && now.After(t.Add(s.expires)):
		return Identity{}, model.Errorf(model.ErrRequestExpired, "Request has expired: it was valid until %s, and it is now %s.", t.Add(s.expires).Format(amzDate), now.Format(amzDate))
	case !s.presigned && t.Before(now.Add(-MaxSkew)):
		return Identity{}, model.Errorf(model.ErrRequestExpired, "Signature expired: %s is now earlier than %s (%s - %v).", s.date, now.Add(-MaxSkew).Format(amzDate), now.Format(amzDate), MaxSkew)
	}
	canonQuery, err := canonicalQuery(r.URL.RawQuery, s.presigned)
	if err != nil {
		return Identity{}, err
	}
	headers, err := canonicalHeaders(r, s.signedHeaders)
	if err != nil {
		return Identity{}, err
	}
	sum := sha256.Sum256(body)
	hashes := []string{hex.EncodeToString(sum[:])}
	if s.presigned && len(body) == 0 {
		hashes = append(hashes, unsignedPayload)
	}
	scope := day + "/" + region + "/" + service + "/aws4_request"
	signingKey := deriveKey(k.SecretAccessKey, day, region, service)
	for _, payload := range hashes {
		creq := r.Method + "\n" + canonicalURI(r.URL) + "\n" + canonQuery + "\n" + headers + "\n" + s.signedHeaders + "\n" + payload
		if hmac.Equal([]byte(signature(signingKey, s.date, scope, creq)), []byte(s.signature)) {
			return Identity{AccessKeyID: k.AccessKeyID, Account: k.Account, key: k}, nil
		}
	}
	return Identity{}, mismatch("The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
}

// deriveKey is SigV4's signing key: HMAC chain of the secret over the
// scope.
func deriveKey(secret, day, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), day)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, "aws4_request")
}

// signature is the hex signature of the canonical request creq.
func signature(signingKey []byte, date, scope, creq string) string {
	h := sha256.Sum256([]byte(creq))
	sts := algorithm + "\n" + date + "\n" + scope + "\n" + hex.EncodeToString(h[:])
	return hex.EncodeToString(hmacSHA256(signingKey, sts))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalURI is the request's escaped path, escaped once more (SigV4 for
// every service but S3), "/" when empty.
func canonicalURI(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		return "/"
	}
	return escape(p, true)
}

// canonicalQuery is the query's parameters, each name and value decoded
// and then escaped as SigV4 says, sorted by name then value, without
// X-Amz-Signature in the presigned form.
func canonicalQuery(raw string, presigned bool) (string, error) {
	if raw == "" {
		return "", nil
	}
	type pair struct{ name, value string }
	var pairs []pair
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		n, err1 := url.QueryUnescape(name)
		val, err2 := url.QueryUnescape(value)
		if err1 != nil || err2 != nil {
			return "", incomplete("The query string is not validly escaped.")
		}
		if presigned && n == "X-Amz-Signature" {
			continue
		}
		pairs = append(pairs, pair{escape(n, false), escape(val, false)})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].name != pairs[j].name {
			return pairs[i].name < pairs[j].name
		}
		return pairs[i].value < pairs[j].value
	})
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p.name + "=" + p.value
	}
	return strings.Join(out, "&"), nil
}

// canonicalHeaders is "name:value\n" for each signed header, in the order
// SignedHeaders lists them (lowercase names, ';'-separated): values
// trimmed, runs of spaces collapsed, several values joined by ','.
func canonicalHeaders(r *http.Request, list string) (string, error) {
	var b strings.Builder
	prev := ""
	for _, name := range strings.Split(list, ";") {
		if name == "" || name != strings.ToLower(name) || name <= prev {
			return "", incomplete("SignedHeaders must be lowercase header names, sorted, each once, separated by ';'.")
		}
		prev = name
		var values []string
		switch name {
		case "host":
			values = []string{r.Host}
		case "content-length":
			values = r.Header.Values("Content-Length")
			if len(values) == 0 && r.ContentLength >= 0 && r.Body != nil && r.Body != http.NoBody {
				values = []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		default:
			values = r.Header.Values(name)
		}
		b.WriteString(name)
		b.WriteByte(':')
		for i, v := range values {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(trimAll(v))
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// trimAll is SigV4's Trimall: leading and trailing spaces removed, and
// each run of spaces inside made one space (only ' ': a tab is kept, as
// the signers keep it).
func trimAll(v string) string {
	v = strings.Trim(v, " ")
	if !strings.Contains(v, "  ") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' && i > 0 && v[i-1] == ' ' {
			continue
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// hasName reports whether the ';'-separated list holds name.
func hasName(list, name string) bool {
	for _, n := range strings.Split(list, ";") {
		if n == name {
			return true
		}
	}
	return false
}

// escape is SigV4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ (and
// '/' when slash) as %XX with upper-case hex.
func escape(s string, slash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || slash && c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func incomplete(format string, args ...any) error {
	return model.Errorf(model.ErrIncompleteSignature, format, args...)
}

func mismatch(msg string) error { return model.Errorf(model.ErrSignatureDoesNotMatch, "%s", msg) }

func unknownKey() error {
	return model.Errorf(model.ErrInvalidClientTokenID, "The security token included in the request is invalid: no key with this access key id is configured.")
}

// truncate shortens a client's string for an error message.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
