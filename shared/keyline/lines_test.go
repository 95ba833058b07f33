package keyline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/workflow"
)

// items is a key's item as a script: each write answers what the test
// says, and is noted.
type items struct {
	holds   []keyline.Hold
	holdErr error
	place   keyline.Place
	waitErr error
	handed  []keyline.Waiter // what Release and Leave hand on
	failing bool             // Release and Leave fail
	calls   []string
}

func (it *items) Hold(_ context.Context, _, key string, _ int, holder string, _, _ time.Time) (keyline.Hold, error) {
	it.calls = append(it.calls, "hold "+holder)
	if it.holdErr != nil {
		return keyline.Hold{}, it.holdErr
	}
	h := it.holds[0]
	it.holds = it.holds[1:]
	return h, nil
}

func (it *items) Wait(_ context.Context, _, _ string, _ int, w keyline.Waiter, _ time.Time) (keyline.Place, error) {
	it.calls = append(it.calls, "wait "+w.ID+" "+string(w.Request))
	return it.place, it.waitErr
}

func (it *items) Release(_ context.Context, _, _, holder string, _ time.Time) ([]keyline.Waiter, error) {
	it.calls = append(it.calls, "release "+holder)
	if it.failing {
		return nil, errors.New("store down")
	}
	return it.handed, nil
}

func (it *items) Leave(_ context.Context, _, _, waiterID string, _ time.Time) ([]keyline.Waiter, error) {
	it.calls = append(it.calls, "leave "+waiterID)
	if it.failing {
		return nil, errors.New("store down")
	}
	return it.handed, nil
}

// sent are the requests a HandOff sent, by queue.
type sent struct{ msgs []string }

func (s *sent) SendJSON(_ context.Context, url string, v any, _ time.Duration) error {
	if strings.Contains(string(v.(json.RawMessage)), "lost") {
		return errors.New("SQS down")
	}
	s.msgs = append(s.msgs, url+" "+string(v.(json.RawMessage)))
	return nil
}

func lines(it *items, s *sent, log *bytes.Buffer) keyline.Lines {
	return keyline.Lines{Items: it, HandOff: keyline.HandOff{Send: s, Queues: map[string]string{"ocr": "q-ocr"}},
		Log: slog.New(slog.NewTextHandler(log, nil)), Now: func() time.Time { return t0 }}
}

func handed(ids ...string) []keyline.Waiter {
	var out []keyline.Waiter
	for _, id := range ids {
		out = append(out, keyline.Waiter{ID: id, Request: json.RawMessage(`"` + id + `"`)})
	}
	return out
}

// A call's walk through its key's line: held at once; or in line, its
// request made only then; or a slot found free as it joins, taken by a
// second hold. Every slot freed on the way is handed on at once, to its
// agent's queue, before Acquire returns: those a Wait handed while the
// line was full too (they waited out their reservation before).
func TestACallsWalkHandsOnEverySlotFreedOnTheWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	holder := keyline.Holder("o-1", workflow.Ref{}, 1, 2)
	call := keyline.Call{Agent: "ocr", Key: "c-1", Limit: 1, Holder: holder, Until: t0.Add(time.Minute),
		Request: func() (json.RawMessage, error) { return json.RawMessage(`{"r":1}`), nil }}
	for _, c := range []struct {
		name  string
		it    items
		want  keyline.Acquired
		calls []string
		sent  []string
	}{
		{"held", items{holds: []keyline.Hold{{Held: true, Handed: handed("w-a")}}}, keyline.Acquired{Held: true},
			[]string{"hold " + holder}, []string{`q-ocr "w-a"`}},
		{"in line", items{holds: []keyline.Hold{{}}, place: keyline.Place{Position: 3, Next: t0.Add(time.Hour)}},
			keyline.Acquired{Position: 3, Next: t0.Add(time.Hour)},
			[]string{"hold " + holder, "wait " + keyline.WaiterOf(holder) + ` {"r":1}`}, nil},
		{"reserved as it joins", items{holds: []keyline.Hold{{}, {Held: true}}, place: keyline.Place{Reserved: true}},
			keyline.Acquired{Held: true},
			[]string{"hold " + holder, "wait " + keyline.WaiterOf(holder) + ` {"r":1}`, "hold " + holder}, nil},
		{"the line full", items{holds: []keyline.Hold{{}}, place: keyline.Place{Handed: handed("w-b", "w-c")}},
			keyline.Acquired{}, []string{"hold " + holder, "wait " + keyline.WaiterOf(holder) + ` {"r":1}`},
			[]string{`q-ocr "w-b"`, `q-ocr "w-c"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log bytes.Buffer
			s := &sent{}
			got, err := lines(&c.it, s, &log).Acquire(ctx, call)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
			require.Equal(t, c.calls, c.it.calls)
			require.Equal(t, c.sent, s.msgs)
			require.Empty(t, log.String())
		})
	}
}

// A request too large for a line is no place in line, asked for only when
// the call must wait; a failed hold is released (its write may have been
// made), and a failed wait leaves the line, each logged when that fails
// too; a hand-off not sent is logged with its waiter, and the others go.
func TestWhatAWalkCouldNotDoIsUndoneOrLogged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	holder := keyline.Holder("o-1", workflow.Ref{}, 1, 2)
	call := keyline.Call{Agent: "ocr", Key: "c-1", Limit: 1, Holder: holder,
		Request: func() (json.RawMessage, error) { return nil, fmt.Errorf("%w: 2000 bytes", keyline.ErrWaiterTooLarge) }}
	var log bytes.Buffer
	it := &items{holds: []keyline.Hold{{}}}
	got, err := lines(it, &sent{}, &log).Acquire(ctx, call)
	require.NoError(t, err)
	require.Equal(t, keyline.Acquired{TooLarge: true}, got)

	it = &items{holdErr: errors.New("throttled"), failing: true}
	_, err = lines(it, &sent{}, &log).Acquire(ctx, call)
	require.ErrorContains(t, err, "throttled")
	require.Equal(t, []string{"hold " + holder, "release " + holder}, it.calls)
	require.Contains(t, log.String(), keyline.NotLetGo)
	require.Contains(t, log.String(), "holder="+holder)

	call.Request = func() (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
	it = &items{holds: []keyline.Hold{{}}, waitErr: errors.New("timeout"), failing: true}
	_, err = lines(it, &sent{}, &log).Acquire(ctx, call)
	require.ErrorContains(t, err, "timeout")
	require.Equal(t, "leave "+keyline.WaiterOf(holder), it.calls[2])
	require.Contains(t, log.String(), keyline.NotOutOfLine)

	log.Reset()
	s := &sent{}
	lines(&items{handed: handed("w-lost", "w-b")}, s, &log).Release(ctx, keyline.Slot{Agent: "ocr", Key: "c-1", Holder: holder})
	require.Equal(t, []string{`q-ocr "w-b"`}, s.msgs)
	require.Contains(t, log.String(), keyline.NotHandedOn)
	require.Contains(t, log.String(), "w-lost")
}
