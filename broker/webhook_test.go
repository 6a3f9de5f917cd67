package broker

import "testing"

func TestWebhookHost(t *testing.T) {
	t.Parallel()
	for u, want := range map[string]string{
		"https://Hooks.Example.com/x?y=1": "hooks.example.com:443",
		"http://hooks.example.com/":       "hooks.example.com:80",
		"http://hooks.example.com:8080/":  "hooks.example.com:8080",
		"https://[::1]:9/x":               "[::1]:9",
		"https://[::1]/x":                 "[::1]:443",
	} {
		if got, err := WebhookHost(u); err != nil || got != want {
			t.Errorf("WebhookHost(%q) = %q, %v; want %q", u, got, err, want)
		}
	}
	for _, u := range []string{"ftp://x/", "/relative", "https://"} {
		if _, err := WebhookHost(u); err == nil {
			t.Errorf("WebhookHost(%q) succeeded", u)
		}
	}
}
