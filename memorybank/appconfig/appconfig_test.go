package appconfig_test

import (
	"slices"
	"testing"

	"github.com/kioku-ai/kioku/memorybank/appconfig"
)

// TestTopics: with no topics configured extraction uses every managed
// topic in the prompts' order; configured ones keep that order, managed
// first, then the app's own with their descriptions.
func TestTopics(t *testing.T) {
	all := []string{appconfig.TopicUserPersonalInfo, appconfig.TopicUserPreferences, appconfig.TopicKeyConversationDetails, appconfig.TopicExplicitInstructions}
	labels, desc := (&appconfig.Config{}).Topics()
	if !slices.Equal(labels, all) || desc[appconfig.TopicUserPreferences] != appconfig.ManagedTopics[appconfig.TopicUserPreferences] {
		t.Fatalf("default topics = %v, %v", labels, desc)
	}
	c := &appconfig.Config{
		ManagedTopics: []string{appconfig.TopicExplicitInstructions, appconfig.TopicUserPersonalInfo},
		CustomTopics:  []appconfig.CustomTopic{{Label: "PETS", Description: "The user's pets."}},
	}
	labels, desc = c.Topics()
	if want := []string{appconfig.TopicUserPersonalInfo, appconfig.TopicExplicitInstructions, "PETS"}; !slices.Equal(labels, want) || desc["PETS"] != "The user's pets." || len(desc) != 3 {
		t.Fatalf("topics = %v, %v; want %v", labels, desc, want)
	}
	labels, _ = (&appconfig.Config{CustomTopics: c.CustomTopics}).Topics()
	if !slices.Equal(labels, []string{"PETS"}) {
		t.Fatalf("custom topics only = %v, want [PETS]", labels)
	}
}
