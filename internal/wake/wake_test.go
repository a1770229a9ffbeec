package wake

import "testing"

// TestBroker: a Notify wakes the key's watchers once (two Notifies merge
// into one pending wake-up), not another key's, and a cancelled watcher
// is forgotten.
func TestBroker(t *testing.T) {
	b := New[string]()
	a1, cancelA1 := b.Subscribe("a")
	a2, cancelA2 := b.Subscribe("a")
	other, cancelOther := b.Subscribe("b")
	defer cancelOther()
	b.Notify("a")
	b.Notify("a")
	for _, ch := range []<-chan struct{}{a1, a2} {
		select {
		case <-ch:
		default:
			t.Fatal("a watcher of a was not woken")
		}
		select {
		case <-ch:
			t.Fatal("two Notifies gave two wake-ups, want one pending")
		default:
		}
	}
	select {
	case <-other:
		t.Fatal("a watcher of b was woken by a Notify of a")
	default:
	}
	cancelA1()
	cancelA2()
	if len(b.subs) != 1 {
		t.Fatalf("%d keys held after the watchers of a left, want 1", len(b.subs))
	}
}
