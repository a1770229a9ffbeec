package memorybank

import (
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/resource"
)

// Limits of the memory bank's inputs, part of the API contract.
const (
	MaxFactBytes          = 4 << 10
	MaxScopeEntries       = 8
	MaxScopeKeyBytes      = 63
	MaxScopeValueBytes    = 256
	MaxTopics             = 16
	MaxMetadataEntries    = 32
	MaxMetadataKeyBytes   = 63
	MaxMetadataValueBytes = 1 << 10
	MaxDisplayNameBytes   = 512
	MaxDescriptionBytes   = 4 << 10
	MaxDirectFacts        = 100
	MaxSourceEventIDs     = 100
	MaxInlineEvents       = 1000
	MaxQueryBytes         = 4 << 10
	DefaultTopK           = 3
	MaxTopK               = 100
	MaxCustomTopics       = 32
	MaxTopicDescription   = 1 << 10
	MaxExamples           = 16
	// MaxConfigTTL bounds the TTLs of a configuration (100 years), so that
	// the expiries they give stay within the times kioku stores.
	MaxConfigTTL = 100 * 365 * 24 * time.Hour
	// MaxEventsPerOperation bounds the events one generation reads from a
	// session; a longer backlog is taken by the next generations.
	MaxEventsPerOperation = 400
	// MaxFactsPerExtraction bounds the facts of one extraction reply (a
	// generation reads at most MaxEventsPerOperation events from a session): a
	// reply with more is refused, not cut, since a model that lists them is
	// not following its instructions.
	MaxFactsPerExtraction = 500
)

var (
	topicLabel = regexp.MustCompile(`^[A-Z0-9_]{1,63}$`)
	plainKey   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)
)

func validateFact(field, fact string) error {
	switch {
	case strings.TrimSpace(fact) == "":
		return fault.Invalidf("%s is required", field)
	case len(fact) > MaxFactBytes:
		return fault.Invalidf("%s is %d bytes; the limit is %d", field, len(fact), MaxFactBytes)
	case !utf8.ValidString(fact):
		return fault.Invalidf("%s is not valid UTF-8", field)
	}
	return nil
}

// validateScope checks a scope.
func validateScope(field string, s memorytype.Scope) error {
	if len(s) == 0 {
		return fault.Invalidf("%s is required, for example {\"user_id\": \"u1\"}", field)
	}
	if len(s) > MaxScopeEntries {
		return fault.Invalidf("%s has %d entries; the limit is %d", field, len(s), MaxScopeEntries)
	}
	for k, v := range s {
		if !plainKey.MatchString(k) {
			return fault.Invalidf("%s key %q must be 1 to %d letters, digits, '_', '.' or '-'", field, k, MaxScopeKeyBytes)
		}
		if v == "" || len(v) > MaxScopeValueBytes || !utf8.ValidString(v) {
			return fault.Invalidf("%s value of %q must be 1 to %d bytes of UTF-8", field, k, MaxScopeValueBytes)
		}
	}
	return nil
}

func validateTopics(field string, topics []string) error {
	if len(topics) > MaxTopics {
		return fault.Invalidf("%s has %d topics; the limit is %d", field, len(topics), MaxTopics)
	}
	for _, t := range topics {
		if !topicLabel.MatchString(t) {
			return fault.Invalidf("%s: topic %q must be 1 to 63 upper-case letters, digits or '_'", field, t)
		}
	}
	return nil
}

// validateText checks a display name or description: UTF-8 within max
// bytes.
func validateText(field, s string, max int) error {
	if len(s) > max {
		return fault.InvalidField(field, "%s is %d bytes; the limit is %d", field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fault.InvalidField(field, "%s is not valid UTF-8", field)
	}
	return nil
}

// validateID checks a memory or operation id: 1 to 128 bytes of letters,
// digits, '-' and '_', starting with a letter or digit.
func validateID(field, id string) error {
	return resource.ValidateID(field, id, resource.MemoryIDChars)
}

// validateConfig checks a configuration.
func validateConfig(c *appconfig.Config) error {
	for _, t := range c.ManagedTopics {
		if _, ok := appconfig.ManagedTopics[t]; !ok {
			return fault.Invalidf("managed_topics: %q is not a managed topic (USER_PERSONAL_INFO, USER_PREFERENCES, KEY_CONVERSATION_DETAILS, EXPLICIT_INSTRUCTIONS)", t)
		}
	}
	if len(c.CustomTopics) > MaxCustomTopics {
		return fault.Invalidf("custom_topics has %d topics; the limit is %d", len(c.CustomTopics), MaxCustomTopics)
	}
	seen := map[string]bool{}
	for _, t := range c.CustomTopics {
		if !topicLabel.MatchString(t.Label) {
			return fault.Invalidf("custom_topics: label %q must be 1 to 63 upper-case letters, digits or '_'", t.Label)
		}
		if _, ok := appconfig.ManagedTopics[t.Label]; ok || seen[t.Label] {
			return fault.Invalidf("custom_topics: label %q is used twice or is a managed topic", t.Label)
		}
		seen[t.Label] = true
		if t.Description == "" || len(t.Description) > MaxTopicDescription || !utf8.ValidString(t.Description) {
			return fault.Invalidf("custom_topics: the description of %q must be 1 to %d bytes of UTF-8", t.Label, MaxTopicDescription)
		}
	}
	if len(c.Examples) > MaxExamples {
		return fault.Invalidf("generation_examples has %d examples; the limit is %d", len(c.Examples), MaxExamples)
	}
	for i, ex := range c.Examples {
		if len(ex.Events) == 0 || len(ex.Events) > 50 {
			return fault.Invalidf("generation_examples[%d] must have 1 to 50 events", i)
		}
		for _, f := range ex.ExpectedFacts {
			if err := validateFact("generation_examples expected fact", f); err != nil {
				return err
			}
		}
	}
	if c.MemoryTTL < 0 || c.RevisionTTL < 0 || c.Trigger.IdleDuration < 0 || c.Trigger.EventCount < 0 {
		return fault.Invalidf("TTLs and trigger values must not be negative")
	}
	if err := c.Retrieval.Fusion.Validate("retrieval.fusion"); err != nil {
		return err
	}
	for _, ttl := range []struct {
		field string
		d     time.Duration
	}{{"memory_ttl", c.MemoryTTL}, {"revision_ttl", c.RevisionTTL}} {
		if ttl.d > MaxConfigTTL {
			return fault.Invalidf("%s %v is longer than %v (100 years), the longest TTL a configuration may give", ttl.field, ttl.d, MaxConfigTTL)
		}
	}
	if err := c.Compaction.Validate(); err != nil {
		return err
	}
	if err := c.PIIRedaction.Validate("pii_redaction"); err != nil {
		return err
	}
	if c.Trigger.IdleDuration != 0 && c.Trigger.IdleDuration < time.Second {
		return fault.Invalidf("generation_trigger.idle_duration must be at least 1s")
	}
	return profile.ValidateSchemas(c.Profiles)
}

// validateTimes checks a memory's event and stated times: zero, or within
// the years a store can keep (as Unix nanoseconds: 1678 to 2261).
func validateTimes(field string, event, stated time.Time) error {
	for _, t := range []struct {
		name string
		at   time.Time
	}{{"event_time", event}, {"stated_time", stated}} {
		if !t.at.IsZero() && (t.at.Year() < 1678 || t.at.Year() > 2261) {
			return fault.Invalidf("%s.%s is %s; it must be between the years 1678 and 2261", field, t.name, t.at.Format(time.RFC3339))
		}
	}
	return nil
}
