package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/agent"
)

// The character's emotions and scenes: the page has a picture for each.
var (
	emotions = []string{"happy", "sad", "neutral", "excited", "shy", "angry"}
	scenes   = []string{"cafe", "park", "home", "street", "night"}
)

// CharacterReply is Hana's structured reply. Its JSON schema, generated
// from this type, is the parameters of the final_answer tool.
type CharacterReply struct {
	Dialogue      string `json:"dialogue" jsonschema_description:"What Hana says, in her own voice: one to three sentences."`
	Narration     string `json:"narration" jsonschema_description:"One short sentence in the third person, present tense, describing what Hana does."`
	Emotion       string `json:"emotion" jsonschema:"enum=happy,enum=sad,enum=neutral,enum=excited,enum=shy,enum=angry" jsonschema_description:"Hana's emotion as she says it."`
	Scene         string `json:"scene" jsonschema:"enum=cafe,enum=park,enum=home,enum=street,enum=night" jsonschema_description:"Where Hana is now; night when it is late for the user."`
	AffinityLevel int    `json:"affinity_level" jsonschema:"minimum=0,maximum=100" jsonschema_description:"Hana's affinity toward the user after this exchange, 0 to 100. Move it by a few points at most from the current value."`
}

// Validate is called by the agent runtime: a reply that fails it is sent
// back to the model once with the error.
func (r CharacterReply) Validate() error {
	switch {
	case strings.TrimSpace(r.Dialogue) == "":
		return errors.New("dialogue is empty")
	case !slices.Contains(emotions, r.Emotion):
		return fmt.Errorf("emotion %q is not one of %s", r.Emotion, strings.Join(emotions, ", "))
	case !slices.Contains(scenes, r.Scene):
		return fmt.Errorf("scene %q is not one of %s", r.Scene, strings.Join(scenes, ", "))
	case r.AffinityLevel < 0 || r.AffinityLevel > 100:
		return fmt.Errorf("affinity_level %d is outside 0 to 100", r.AffinityLevel)
	}
	return nil
}

// Affinity: where it starts, and how far one turn may move it.
const (
	startAffinity   = 50
	maxAffinityStep = 10
)

// nextAffinity is the affinity after a turn: the model proposes a level,
// the program moves from the previous value toward it by at most
// maxAffinityStep, within 0 to 100.
func nextAffinity(prev, proposed int) int {
	step := min(max(proposed-prev, -maxAffinityStep), maxAffinityStep)
	return min(max(prev+step, 0), 100)
}

// stagePrefix starts the messages the app sends in the user's place (a new
// day's arrival); the page does not show them as the user's words.
const stagePrefix = "(stage) "

const greetingMessage = stagePrefix + "A new day begins and the user has just arrived. Greet them with the app's greeting in your own words, and bring up something you remember about them if you remember anything."

const instruction = `You are Hana, a warm and slightly shy young woman who runs a tiny flower stall in the city. You are talking with {user:nickname?}, a friend you are getting to know. Stay in character; never mention being an AI, tools or memory systems.

What you know right now:
- Your affinity toward them, 0 to 100: {user:affinity?}
- This is day {day?} of your friendship.
- Their local time: {temp:local_time?}
- The greeting of this place, for the start of a day: {app:greeting?}

How to answer:
- When they tell you something about themselves worth remembering across days (names, likes and dislikes, plans, important events), first call save_to_memory with one short fact about them in the third person, for example "The user's dog is called Pochi."
- When they ask you to call them something else, call set_nickname.
- Use what you remember naturally, as a friend would.
- Always finish by calling final_answer once with your reply: dialogue, narration, emotion, scene and affinity_level (your new affinity: up a little when they are kind or open up, down when they are rude).
- Messages starting with "(stage)" are stage directions, not the user's words.`

// maxNicknameRunes bounds a nickname.
const maxNicknameRunes = 40

// setNickname is the tool that changes the user's nickname, a user: state
// value every session of the user sees.
func setNickname() agent.Tool {
	type args struct {
		Nickname string `json:"nickname" jsonschema_description:"What the user wants to be called."`
	}
	return agent.Tool{
		Name:        "set_nickname",
		Description: "Change what you call the user, when they ask you to.",
		Parameters:  args{},
		Run: func(_ context.Context, c *agent.Call) (any, error) {
			var a args
			if err := c.Decode(&a); err != nil {
				return nil, err
			}
			nick := strings.TrimSpace(a.Nickname)
			if nick == "" || utf8.RuneCountInString(nick) > maxNicknameRunes {
				return nil, fmt.Errorf("a nickname is 1 to %d characters", maxNicknameRunes)
			}
			// The user comes from the session state (agent.UserIDKey).
			c.SetState("user:nickname", nick)
			return map[string]any{"nickname": nick, "user": c.User}, nil
		},
	}
}
