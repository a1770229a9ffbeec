package transport

import (
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The handlers parse names with package resource; these adapt its results to
// the session domain's types.

func parseSessionKey(field, name string) (sessiontype.Key, error) {
	app, user, id, err := resource.ParseSession(field, name)
	return sessiontype.Key{App: app, User: user, ID: id}, err
}

func parseStateRef(field, name string) (sessiontype.StateRef, error) {
	app, user, err := resource.ParseState(field, name)
	return sessiontype.StateRef{App: app, User: user}, err
}

func stateName(ref sessiontype.StateRef) string {
	if ref.User == "" {
		return resource.AppStateName(ref.App)
	}
	return resource.UserStateName(ref.App, ref.User)
}

func eventName(k sessiontype.Key, id string) string {
	return resource.EventName(k.App, k.User, k.ID, id)
}
