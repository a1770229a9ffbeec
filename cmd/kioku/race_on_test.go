//go:build race

package main_test

// raceSlowdown scales the waits of the tests that bound how long
// something takes across processes: the race detector makes kioku's
// servers several times slower, and CI runs every package under it at
// once on two cores. The bounds an issue asks for are checked without
// it (scripts/test).
const raceSlowdown = 3
