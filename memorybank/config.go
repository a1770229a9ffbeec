package memorybank

import (
	"context"
	"slices"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
)

// GetConfig returns an app's configuration.
func (s *Service) GetConfig(ctx context.Context, app string) (*appconfig.Config, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	return s.store.GetConfig(ctx, app)
}

// configFields are the fields of appconfig.Config an update mask may
// name, each with what copies it from an update to the configuration.
var configFields = []struct {
	path string
	set  func(next, c *appconfig.Config, now time.Time)
}{
	{"managed_topics", func(next, c *appconfig.Config, _ time.Time) { next.ManagedTopics = c.ManagedTopics }},
	{"custom_topics", func(next, c *appconfig.Config, _ time.Time) { next.CustomTopics = c.CustomTopics }},
	{"generation_examples", func(next, c *appconfig.Config, _ time.Time) { next.Examples = c.Examples }},
	{"memory_ttl", func(next, c *appconfig.Config, _ time.Time) { next.MemoryTTL = c.MemoryTTL }},
	{"revision_ttl", func(next, c *appconfig.Config, _ time.Time) { next.RevisionTTL = c.RevisionTTL }},
	{"generation_trigger", func(next, c *appconfig.Config, _ time.Time) { next.Trigger = c.Trigger }},
	{"retrieval", func(next, c *appconfig.Config, _ time.Time) { next.Retrieval = c.Retrieval }},
	{"compaction_trigger", func(next, c *appconfig.Config, _ time.Time) { next.Compaction = c.Compaction }},
	{"pii_redaction", func(next, c *appconfig.Config, _ time.Time) { next.PIIRedaction = c.PIIRedaction }},
	{"profile_schemas", func(next, c *appconfig.Config, _ time.Time) { next.Profiles = c.Profiles }},
	{"webhooks", func(next, c *appconfig.Config, now time.Time) {
		next.Webhooks = prepareWebhooks(next.Webhooks, c.Webhooks, now)
	}},
}

// configPaths are the paths of configFields, in their order.
var configPaths = func() []string {
	out := make([]string, len(configFields))
	for i, f := range configFields {
		out[i] = f.path
	}
	return out
}()

// UpdateConfig changes the fields of an app's configuration named in mask
// (all of them when mask is empty) to those of c.
func (s *Service) UpdateConfig(ctx context.Context, c *appconfig.Config, mask []string) (*appconfig.Config, error) {
	if err := validateApp(c.App); err != nil {
		return nil, err
	}
	if len(mask) == 0 {
		mask = configPaths
	}
	cur, err := s.store.GetConfig(ctx, c.App)
	if err != nil {
		return nil, err
	}
	next := *cur
	now := s.now()
	for _, path := range mask {
		i := slices.Index(configPaths, path)
		if i < 0 {
			return nil, fault.Invalidf("update_mask path %q is not a field of the memory bank configuration (%v)", path, configPaths)
		}
		configFields[i].set(&next, c, now)
	}
	if err := validateConfig(&next); err != nil {
		return nil, err
	}
	if err := validateWebhooks(next.Webhooks, s.cfg.WebhooksAllowLoopbackHTTP); err != nil {
		return nil, err
	}
	if err := s.parts.supports(&next); err != nil {
		return nil, err
	}
	next.App = c.App
	next.UpdateTime = now
	if err := s.store.PutConfig(ctx, &next); err != nil {
		return nil, err
	}
	s.configMu.Lock()
	delete(s.configCache, c.App)
	s.configMu.Unlock()
	s.configs.Notify(struct{}{})
	return &next, nil
}

// configTTL is how long a configuration is cached for the hot paths
// (appends that may trigger generation).
const configTTL = 5 * time.Second

// AppConfig returns an app's configuration as the hot paths read it (the
// appends that may trigger a generation or a compaction): cached for a few
// seconds, and read afresh after an UpdateConfig through this Service.
func (s *Service) AppConfig(ctx context.Context, app string) (*appconfig.Config, error) {
	return s.config(ctx, app)
}

// config returns an app's configuration, cached briefly.
func (s *Service) config(ctx context.Context, app string) (*appconfig.Config, error) {
	now := s.now()
	s.configMu.Lock()
	c, ok := s.configCache[app]
	s.configMu.Unlock()
	if ok && now.Sub(c.at) < configTTL {
		return c.cfg, nil
	}
	cfg, err := s.store.GetConfig(ctx, app)
	if err != nil {
		return nil, err
	}
	s.configMu.Lock()
	s.configCache[app] = cachedConfig{cfg: cfg, at: now}
	s.configMu.Unlock()
	return cfg, nil
}
