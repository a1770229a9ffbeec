package transport

import (
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions"
)

// The handlers parse names with package resource; these adapt its results to
// the session domain's types.

func parseSessionKey(field, name string) (sessions.Key, error) {
	app, user, id, err := resource.ParseSession(field, name)
	return sessions.Key{App: app, User: user, ID: id}, err
}

func parseStateRef(field, name string) (sessions.StateRef, error) {
	app, user, err := resource.ParseState(field, name)
	return sessions.StateRef{App: app, User: user}, err
}

func stateName(ref sessions.StateRef) string {
	if ref.User == "" {
		return resource.AppStateName(ref.App)
	}
	return resource.UserStateName(ref.App, ref.User)
}

func eventName(k sessions.Key, id string) string { return resource.EventName(k.App, k.User, k.ID, id) }
