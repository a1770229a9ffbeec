package transport

// growStack grows the calling goroutine's stack to 32 KiB (at least) in
// one step, while the stack is still shallow.
//
// Every request runs in a goroutine of its own that starts with a small
// stack (the runtime's average, a few KiB), and an API call needs about
// 20 KiB: the HTTP/2 server, Connect, the interceptors, the service and,
// for the append that leads a group commit, SQLite. The stack then grows
// where it first overflows, deep in the call, and growing copies it and
// adjusts every frame on it: in a CPU profile of bench sessions' append
// phase, runtime.newstack took 6% of the process's CPU, at the request
// body's read, in encoding/json and in OpenTelemetry's attribute hashing.
// Grown here, at the top of the handler, the copy has a few frames to
// adjust: 0.9% (the zeroing of the frame below included). The price is
// the memory of a 32 KiB stack for each request in flight.
//
//go:noinline
func growStack() {
	var frame [16 << 10]byte
	keepFrame(frame[:])
}

// keepFrame uses growStack's frame, so that the compiler keeps it whole.
//
//go:noinline
func keepFrame(b []byte) {
	if len(b) == 0 {
		panic("server: empty stack frame")
	}
}
