// Package enumname maps the small enums of kioku's domains (states,
// actions, error kinds) to and from their stored names. Each enum keeps a
// map of its values to their names, part of the stored formats: a name
// never changes, and a new value gets a new one.
package enumname

import "fmt"

// String returns v's name in names, or unnamed for a value that has none
// (the zero value's name, such as "UNSPECIFIED").
func String[E comparable](names map[E]string, v E, unnamed string) string {
	if n, ok := names[v]; ok {
		return n
	}
	return unnamed
}

// Parse returns the value that name is the name of in names; what names
// the enum in the error for a name that is not there.
func Parse[E comparable](names map[E]string, name, what string) (E, error) {
	for v, n := range names {
		if n == name {
			return v, nil
		}
	}
	var zero E
	return zero, fmt.Errorf("unknown %s %q", what, name)
}
