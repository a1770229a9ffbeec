package transport

import "testing"

// TestGrowStackStaysOnTheStack: growStack's frame is on the goroutine's
// stack, not allocated on the heap at every request.
func TestGrowStackStaysOnTheStack(t *testing.T) {
	if n := testing.AllocsPerRun(100, growStack); n != 0 {
		t.Errorf("growStack allocates %v times a call; its frame must stay on the stack", n)
	}
}
