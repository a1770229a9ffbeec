package resource_test

import (
	"fmt"

	"github.com/kioku-ai/kioku/resource"
)

func ExampleSessionName() {
	name := resource.SessionName("demo", "ann", "s1")
	app, user, session, _ := resource.ParseSession("name", name)
	fmt.Println(name)
	fmt.Println(app, user, session)
	// Output:
	// apps/demo/users/ann/sessions/s1
	// demo ann s1
}

func ExampleParseSession() {
	_, _, _, err := resource.ParseSession("session", "apps/demo/users/ann")
	fmt.Println(err)
	_, _, _, err = resource.ParseSession("session", "apps/demo/users/ann/sessions/s 1")
	fmt.Println(err)
	// Output:
	// session "apps/demo/users/ann" is not of the form apps/{app}/users/{user}/sessions/{session}
	// session id "s 1" has the character U+0020 (a space or control character) at byte 1; allowed are ASCII letters, digits and "-_."
}
