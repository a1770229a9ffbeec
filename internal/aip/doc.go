// Package aip holds what the List methods and the services of kioku share
// beyond resource names (which are package resource's): the opaque page
// tokens bound to their query and the page sizes (AIP-158), the random ids
// kioku assigns and the services' default clock, and Truncate, which
// quotes caller input in an error message.
package aip
