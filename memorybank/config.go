package memorybank

import (
	"context"
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

// The fields of appconfig.Config an update mask may name.
var configFields = []string{"managed_topics", "custom_topics", "generation_examples", "memory_ttl", "revision_ttl", "generation_trigger", "retrieval", "compaction_trigger", "pii_redaction", "profile_schemas"}

// UpdateConfig changes the fields of an app's configuration named in mask
// (all of them when mask is empty) to those of c.
func (s *Service) UpdateConfig(ctx context.Context, c *appconfig.Config, mask []string) (*appconfig.Config, error) {
	if err := validateApp(c.App); err != nil {
		return nil, err
	}
	if len(mask) == 0 {
		mask = configFields
	}
	cur, err := s.store.GetConfig(ctx, c.App)
	if err != nil {
		return nil, err
	}
	next := *cur
	for _, f := range mask {
		switch f {
		case "managed_topics":
			next.ManagedTopics = c.ManagedTopics
		case "custom_topics":
			next.CustomTopics = c.CustomTopics
		case "generation_examples":
			next.Examples = c.Examples
		case "memory_ttl":
			next.MemoryTTL = c.MemoryTTL
		case "revision_ttl":
			next.RevisionTTL = c.RevisionTTL
		case "generation_trigger":
			next.Trigger = c.Trigger
		case "compaction_trigger":
			next.Compaction = c.Compaction
		case "retrieval":
			next.Retrieval = c.Retrieval
		case "pii_redaction":
			next.PIIRedaction = c.PIIRedaction
		case "profile_schemas":
			next.Profiles = c.Profiles
		default:
			return nil, fault.Invalidf("update_mask path %q is not a field of the memory bank configuration (%v)", f, configFields)
		}
	}
	if err := validateConfig(&next); err != nil {
		return nil, err
	}
	next.App = c.App
	next.UpdateTime = s.now()
	if err := s.store.PutConfig(ctx, &next); err != nil {
		return nil, err
	}
	s.configMu.Lock()
	delete(s.configCache, c.App)
	s.configMu.Unlock()
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
