// Package appconfig is an app's memory bank configuration (Config): the
// topics extraction looks for (the managed topics and the app's own),
// few-shot examples, the TTLs of memories and revisions, the generation
// trigger, retrieval's fusion, the redaction of personal data, the
// structured profile schemas, and the sessions' compaction trigger, which
// the same stored document keeps. Package memorybank validates, stores
// and applies it.
package appconfig

import (
	"slices"
	"time"

	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/redact"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The managed memory topics.
const (
	TopicUserPersonalInfo       = "USER_PERSONAL_INFO"
	TopicUserPreferences        = "USER_PREFERENCES"
	TopicKeyConversationDetails = "KEY_CONVERSATION_DETAILS"
	TopicExplicitInstructions   = "EXPLICIT_INSTRUCTIONS"
)

// ManagedTopics describes the managed topics, for the extraction prompt.
var ManagedTopics = map[string]string{
	TopicUserPersonalInfo:       "Significant personal information about the user: names, relationships, hobbies, important dates, work, where they live.",
	TopicUserPreferences:        "The user's stated or implied likes, dislikes, preferred styles and patterns.",
	TopicKeyConversationDetails: "Important milestones or conclusions within the dialogue: decisions, outcomes, plans.",
	TopicExplicitInstructions:   "Information the user explicitly asked to be remembered or forgotten.",
}

// managedOrder is the order of the managed topics in prompts.
var managedOrder = []string{TopicUserPersonalInfo, TopicUserPreferences, TopicKeyConversationDetails, TopicExplicitInstructions}

// CustomTopic is an app's own topic.
type CustomTopic struct {
	Label       string
	Description string
}

// Example is a few-shot example for extraction.
type Example struct {
	Events        []*sessiontype.Event
	ExpectedFacts []string
}

// Trigger makes memories appear without the caller asking.
type Trigger struct {
	// EventCount generates from a session every time this many new events
	// have been appended to it since its last generation; 0 is off.
	EventCount int
	// IdleDuration generates from a session once it has been idle this
	// long; 0 is off.
	IdleDuration time.Duration
}

// Retrieval tunes an app's similarity search.
type Retrieval struct {
	// Fusion combines the two sides of hybrid retrieval.
	Fusion retrieval.Fusion
}

// Config is an app's memory bank configuration. Package memorybank
// validates it (UpdateConfig) and keeps one per app.
type Config struct {
	App string
	// ManagedTopics to extract; empty (with no custom topics) means all.
	ManagedTopics []string
	CustomTopics  []CustomTopic
	Examples      []Example
	// MemoryTTL and RevisionTTL make new memories and revisions expire.
	MemoryTTL   time.Duration
	RevisionTTL time.Duration
	Trigger     Trigger
	Retrieval   Retrieval
	// Compaction compacts the app's sessions without the caller asking:
	// package sessions' setting, kept in the memory bank's configuration,
	// where kioku.v1's MemoryBankConfig has it (see the package
	// documentation).
	Compaction sessions.CompactionTrigger
	// PIIRedaction redacts personal data from what the app's memory bank
	// and compactions send to models and from the memories stored.
	PIIRedaction Redaction
	// Profiles are the app's structured profile schemas (package
	// profile): generation fills one profile per schema and scope.
	Profiles []profile.Schema
	// Webhooks are the app's webhook endpoints (package memorybank
	// validates them; internal/webhooks delivers their events).
	Webhooks   []Webhook
	UpdateTime time.Time
}

// Webhook is an endpoint told of the app's events.
type Webhook struct {
	URL string
	// Secret is the signing secret, "whsec_" and base64 of its bytes.
	Secret string
	// Events are the event types sent (memorybank's Event* names).
	Events []string
	// OmitFact sends memory events with the memory's name only (the API's
	// include_fact false).
	OmitFact bool
	// CreateTime is when the webhook (its URL) was added: it is sent the
	// events of the changes committed from then on.
	CreateTime time.Time
	// SecretGenerated marks a secret the update that returned this
	// configuration generated: that answer shows it, the only time it is
	// shown. It is not stored.
	SecretGenerated bool
}

// Wants reports whether the webhook takes events of a type.
func (w *Webhook) Wants(event string) bool { return slices.Contains(w.Events, event) }

// Topics returns the topics extraction may use: label → description.
func (c *Config) Topics() (labels []string, descriptions map[string]string) {
	descriptions = map[string]string{}
	managed := c.ManagedTopics
	if len(managed) == 0 && len(c.CustomTopics) == 0 {
		managed = managedOrder
	}
	for _, t := range managedOrder {
		if slices.Contains(managed, t) {
			labels = append(labels, t)
			descriptions[t] = ManagedTopics[t]
		}
	}
	for _, t := range c.CustomTopics {
		labels = append(labels, t.Label)
		descriptions[t.Label] = t.Description
	}
	return labels, descriptions
}

// Redaction is an app's redaction of personal data (package redact).
// With Enabled, every text sent to a model for extraction, consolidation
// or a session's compaction is redacted (redact.Generator), and so is
// every memory fact before it is stored, however it came (a direct fact,
// a model's reply, memorybank's CreateMemory, UpdateMemory, a rollback),
// and every similarity search query before it is embedded, and every fact
// embedded again after a change of embedder (memorybank's Reembed). Session events and state
// are stored as given.
type Redaction struct {
	Enabled bool
	// Rules say what is redacted (no categories: all of them).
	redact.Rules
}
