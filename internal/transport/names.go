package transport

import (
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/sessions"
)

// The handlers parse names with package aip; these adapt its results to
// the session domain's types.

func parseSessionKey(field, name string) (sessions.Key, error) {
	app, user, id, err := aip.ParseSession(field, name)
	return sessions.Key{App: app, User: user, ID: id}, err
}

func parseStateRef(field, name string) (sessions.StateRef, error) {
	app, user, err := aip.ParseState(field, name)
	return sessions.StateRef{App: app, User: user}, err
}

func stateName(ref sessions.StateRef) string {
	if ref.User == "" {
		return aip.AppStateName(ref.App)
	}
	return aip.UserStateName(ref.App, ref.User)
}

func eventName(k sessions.Key, id string) string { return aip.EventName(k.App, k.User, k.ID, id) }
