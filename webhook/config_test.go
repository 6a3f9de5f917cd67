package webhook

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := DefaultConfig()
	ok.Secret = testSecret
	if err := ok.Validate(); err != nil {
		t.Fatalf("DefaultConfig with a secret: %v", err)
	}
	for _, c := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no secret", func(c *Config) { c.Secret = "" }, "Secret"},
		{"short secret", func(c *Config) { c.Secret = "short" }, "at least 16 bytes"},
		{"bad host", func(c *Config) { c.AllowedHosts = []string{"https://hooks.example.com/x"} }, "allowed host"},
		{"bad port", func(c *Config) { c.AllowedHosts = []string{"hooks.example.com:70000"} }, "1..65535"},
		{"timeout low", func(c *Config) { c.Timeout = time.Millisecond }, "Timeout"},
		{"timeout high", func(c *Config) { c.Timeout = time.Hour }, "Timeout"},
		{"batch", func(c *Config) { c.MaxBatch = 1001 }, "MaxBatch"},
		{"window", func(c *Config) { c.Window = time.Minute }, "Window"},
	} {
		cfg := ok
		c.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

func TestParseHosts(t *testing.T) {
	t.Parallel()
	l, err := ParseHosts("Hooks.Example.com, localhost:8080", "", "[::1]:9000,10.0.0.7")
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"hooks.example.com:443": true, "hooks.example.com:80": true, "hooks.example.com:8443": false,
		"localhost:8080": true, "localhost:80": false, "[::1]:9000": true, "[::1]:443": false,
		"10.0.0.7:443": true, "10.0.0.7:8080": false, "evil.example.com:443": false,
		"HOOKS.EXAMPLE.COM:443": true,
	} {
		if got := l.Allowed(host); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", host, got, want)
		}
	}
	if err := l.AllowedURL("https://hooks.example.com/x?y"); err != nil {
		t.Errorf("AllowedURL: %v", err)
	}
	if err := l.AllowedURL("https://hooks.example.com:9/x"); err == nil {
		t.Error("AllowedURL of another port succeeded")
	}
	for _, bad := range []string{"https://x", "x/y", "x:0", "x:port", "user@x", "[::1", ":80"} {
		if _, err := ParseHosts(bad); err == nil {
			t.Errorf("ParseHosts(%q) succeeded", bad)
		}
	}
	var none *HostList
	if none.Allowed("x:443") || none.Len() != 0 {
		t.Error("a nil list allows something")
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	secret, body := []byte(testSecret), []byte(`{"events":[]}`)
	now := time.Unix(1717243200, 0)
	h := signatureValue(secret, now.Unix(), body)
	if err := Verify(secret, h, body, now.Add(time.Minute), 0); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for _, c := range []struct {
		name   string
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"other body", h, []byte(`{"events":[1]}`), now, ErrBadSignature},
		{"too old", h, body, now.Add(6 * time.Minute), ErrStale},
		{"from the future", h, body, now.Add(-6 * time.Minute), ErrStale},
		{"no header", "", body, now, ErrNoSignature},
		{"no v1", "t=1717243200", body, now, ErrNoSignature},
		{"bad t", "t=x,v1=00", body, now, ErrNoSignature},
	} {
		if err := Verify(secret, c.header, c.body, c.now, 0); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
	// A second v1 (a rotated secret) is accepted when one matches.
	if err := Verify(secret, "t=1717243200,v1=00,"+strings.SplitN(h, ",", 2)[1], body, now, 0); err != nil {
		t.Errorf("Verify with two v1: %v", err)
	}
}
