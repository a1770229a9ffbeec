package main_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// amplified is a JSON array of zeros that makes a request body of about
// 16 MiB, just under the message limit: 8 million values that protojson
// would decode into a gigabyte of google.protobuf.Value messages.
func amplified(prefix, suffix string) []byte {
	const size = 16<<20 - 4<<10
	n := (size - len(prefix) - len(suffix) - 2) / 2
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(prefix)
	b.WriteByte('[')
	b.WriteByte('0')
	for range n - 1 {
		b.WriteString(",0")
	}
	b.WriteByte(']')
	b.WriteString(suffix)
	return b.Bytes()
}

// amplifiedProto is the binary UpdateStateRequest of about 16 MiB whose
// state_delta holds a list of 8 million empty values (two bytes each).
func amplifiedProto(name string) []byte {
	const n = (16<<20 - 4<<10) / 2
	list := bytes.Repeat([]byte{0x0a, 0x00}, n)                                                   // ListValue.values: empty Values
	value := protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), list)        // Value.list_value
	entry := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("a")) // key
	entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), value)      // value
	st := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry)          // Struct.fields
	req := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), name)         // name
	return protowire.AppendBytes(protowire.AppendTag(req, 2, protowire.BytesType), st)            // state_delta
}

// procStatusKB reads a figure of /proc/PID/status, in kB.
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the server's memory: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestAmplifiedBodiesAreRefusedWithBoundedMemory sends a real kioku serve
// one 16 MiB body that decodes into 8 million values on each surface that
// reads one (kioku.v1 over Connect JSON, Connect binary and REST; the
// Vertex AI API over REST and Connect): each is refused
// INVALID_ARGUMENT naming the limit, and raises the server's peak
// resident memory by less than 200 MB (decoding it took the server from
// 47 MB to 970 MB). The time each took is logged (go test -v), not
// asserted.
func TestAmplifiedBodiesAreRefusedWithBoundedMemory(t *testing.T) {
	t.Parallel()
	proc := startKioku(t, "--data-dir", t.TempDir(), "--model-provider", "none")
	pid := proc.cmd.Process.Pid
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/clear_refs", pid)); err != nil {
		t.Fatalf("this test reads the server's peak memory from /proc (Linux): %v", err)
	}
	const vertexSession = "projects/p/locations/us-central1/reasoningEngines/e/sessions/s"
	event := `{"author":"user","invocationId":"i","timestamp":"2025-01-01T00:00:00Z","actions":{"stateDelta":{"a":`
	for _, c := range []struct {
		surface, method, path, ctype string
		body                         []byte
	}{
		{"kioku.v1 Connect JSON", "POST", "/kioku.v1.SessionService/UpdateState", "application/json",
			amplified(`{"name":"apps/a/users/u/state","state_delta":{"a":`, `}}`)},
		{"kioku.v1 Connect binary", "POST", "/kioku.v1.SessionService/UpdateState", "application/proto",
			amplifiedProto("apps/a/users/u/state")},
		{"kioku.v1 REST", "PATCH", "/v1/apps/a/users/u/state", "application/json",
			amplified(`{"a":`, `}`)},
		{"Vertex REST", "POST", "/v1beta1/" + vertexSession + ":appendEvent", "application/json",
			amplified(event, `}}}`)},
		{"Vertex Connect JSON", "POST", "/google.cloud.aiplatform.v1beta1.SessionService/AppendEvent", "application/json",
			amplified(`{"name":"`+vertexSession+`","event":`+event, `}}}}`)},
	} {
		if len(c.body) > 16<<20 {
			t.Fatalf("%s: the body is %d bytes, over the message limit", c.surface, len(c.body))
		}
		// Settle, and count the peak from here.
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			t.Fatal(err)
		}
		before := procStatusKB(t, pid, "VmRSS")
		req, _ := http.NewRequest(c.method, proc.url+c.path, bytes.NewReader(c.body))
		req.Header.Set("Content-Type", c.ctype)
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.surface, err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		took := time.Since(start)
		peak := procStatusKB(t, pid, "VmHWM")
		if res.StatusCode != http.StatusBadRequest || !bytes.Contains(out, []byte("262144")) {
			t.Errorf("%s: %s %.300s; want 400 naming the limit of 262144 values", c.surface, res.Status, out)
		}
		raised := float64(peak-before) / 1024
		t.Logf("%s: %d bytes refused in %v; peak RSS %.0f MB, %.0f MB over the %.0f MB before", c.surface, len(c.body), took.Round(time.Millisecond), float64(peak)/1024, raised, float64(before)/1024)
		if raised >= 200 {
			t.Errorf("%s: the refusal raised the server's peak memory by %.0f MB; want under 200", c.surface, raised)
		}
	}
}
