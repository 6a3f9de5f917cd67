package embedded

import (
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/storage"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		mod  func(*Config)
		want string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no dir", func(c *Config) { c.Dir = "" }, "Config.Dir is required"},
		{"tiny cache", func(c *Config) { c.CacheBytes = 1000 }, "Config.CacheBytes 1000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.Dir = t.TempDir()
			c.mod(&cfg)
			err := cfg.withDefaults().Validate()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("Validate() = %v, want %q", err, c.want)
			}
			if c.want != "" {
				if b, err := Open(cfg); err == nil {
					_ = b.Close()
					t.Fatal("Open accepted an invalid Config")
				}
			}
		})
	}
	if got := DefaultConfig(); got.CacheBytes != 64<<20 || got.Options != (storage.Options{}) {
		t.Fatalf("DefaultConfig() = %+v", got)
	}
}
