package emulatortest

import (
	"bytes"
	"sync"
)

// Logs keeps what a pipeline under test logs, safe for its handlers'
// concurrent writes and the test's reads: a failed test shows its tail, a
// test waits for a line in it.
type Logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Tail is the last n bytes logged.
func (l *Logs) Tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.b.Bytes()
	return string(b[max(0, len(b)-n):])
}
