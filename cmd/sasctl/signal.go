package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/client"
	"github.com/sas-go/sas/shared/message"
)

// signalLong is sasctl signal's help.
const signalLong = `signal sends an event to an order on the deployment's events queue, as a service would:
{"kind":"event","orderId":ORDER,"event":EVENT,"eventId":...,"data":...}. The step that waits for
EVENT (wait: {event: EVENT}) takes the data as its result; an event that arrives before the order
reaches that step is kept until it does (the order records it). It prints the eventId (made up when --event-id is not
given): sending it again is a no-op. An order that is not stored is said so, and nothing is sent;
with --ahead (an order just submitted, not stored yet) the event is sent all the same, and Submission
takes it once the order is stored, or, if it is not within about 10 s, puts it in the events DLQ. An
event the order cannot take (no step waits for it, the order ended, a sender the wait does not
take) goes to the events DLQ with the reason: sasctl dlq show events. With --wait DURATION it waits
for the verdict: taken (the order recorded the event), or refused (found in the events DLQ: the
reason on stderr, exit 1); no verdict within DURATION is exit 1 too. An event over SQS's 256 KiB
(its data may be up to the workflow's resultLimit) is kept in the payload bucket (--payload-bucket)
and an SQS Extended Client pointer to it sent.`

// signalFlags are sasctl signal's flags.
type signalFlags struct {
	t             target
	data, eventID string
	ahead         bool
	wait          time.Duration
}

func signalCmd() *cobra.Command {
	var f signalFlags
	cmd := &cobra.Command{
		Use:   "signal ORDER EVENT",
		Short: "send an event to an order: the step that waits for it takes its data",
		Long:  signalLong,
		Example: `  sasctl signal o-1 approved --data '{"amountCents": 1998, "by": "ana"}'
  sasctl signal o-1 approved --data @approval.json --event-id e-7
  sasctl signal o-1 approved --wait 10s
  sasctl submit order.json && sasctl signal --ahead o-1 approved`,
		Args: exactly(2, "an ORDER id and an EVENT name"),
		RunE: f.run,
	}
	targetFlags(cmd, &f.t, true)
	cmd.Flags().StringVar(&f.data, "data", "", "the event's data: JSON, or @FILE to read it from a file (@- from stdin)")
	cmd.Flags().StringVar(&f.eventID, "event-id", "", "the event's id (1-128 letters, digits or _.:-); default: a new one")
	waitFlag(cmd, &f.wait, "the event")
	cmd.Flags().BoolVar(&f.ahead, "ahead", false, "send the event even if the order is not stored yet (just submitted): Submission takes it once it is")
	return cmd
}

// run sends the event, and with --wait waits for its verdict.
func (f *signalFlags) run(cmd *cobra.Command, args []string) error {
	body, err := readData(f.data, cmd.InOrStdin())
	if err != nil {
		return err
	}
	op, err := f.t.connect(cmd.Context(), false)
	if err != nil {
		return err
	}
	since := time.Now()
	c := client.Of(op)
	res, err := c.Signal(cmd.Context(), args[0], args[1], body, f.eventID, signalOptions(f.ahead)...)
	switch {
	case errors.Is(err, client.ErrBadEvent):
		return usageError{err}
	case errors.Is(err, client.ErrNotFound):
		return fmt.Errorf("order %s not found: nothing sent (an order just submitted may not be stored yet: "+
			"--ahead sends the event all the same)", args[0])
	case err != nil:
		return f.t.explainOrder(args[0], err)
	}
	if res.Ahead {
		fmt.Fprintf(cmd.ErrOrStderr(), "order %s is not stored yet: Submission takes the event once it is, "+
			"or, if it is not within about 10 s, puts the event in the events DLQ\n", res.OrderID)
	}
	out := cmd.OutOrStdout()
	sent := func() {
		fmt.Fprintf(out, "sent event %s to order %s (eventId %s: send it again with --event-id %[3]s, and it is a no-op)\n",
			res.Event, res.OrderID, res.EventID)
	}
	if f.wait <= 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "whether order %s took it: sasctl status %[1]s; an event refused is in the "+
			"events DLQ with the reason: sasctl dlq show events (or send with --wait 10s)\n", res.OrderID)
		return emit(out, f.t.output, res, sent)
	}
	v, err := c.AwaitEvent(cmd.Context(), res, since, f.wait)
	if err != nil {
		return f.t.explain(err)
	}
	if err := emit(out, f.t.output, signalWaited{res, &v}, sent); err != nil {
		return err
	}
	if !printVerdict(f.t.textOut(out), cmd.ErrOrStderr(), cmd.CommandPath(), "event "+res.Event+" of order "+res.OrderID,
		"events", v, f.wait) {
		return errReported
	}
	return nil
}

// signalOptions are client.Signal's options for --ahead: without it, only
// an order stored now is sent its event.
func signalOptions(ahead bool) []client.SignalOption {
	if ahead {
		return nil
	}
	return []client.SignalOption{client.IfStored()}
}

// readData reads --data: JSON, @FILE or @- (stdin); "" is no data.
func readData(arg string, stdin io.Reader) (json.RawMessage, error) {
	if arg == "" {
		return nil, nil
	}
	text, from := []byte(arg), "--data"
	if path, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if path == "-" {
			text, err = io.ReadAll(io.LimitReader(stdin, message.MaxEventBytes+1))
		} else {
			text, err = os.ReadFile(path)
		}
		if err != nil {
			return nil, usageErrorf("--data %s: %w", arg, err)
		}
		from = "--data " + arg
	}
	if len(text) > message.MaxEventBytes {
		return nil, usageErrorf("%s is over %d bytes, the largest event (its data at most a workflow's largest resultLimit)", from, message.MaxEventBytes)
	}
	var v any
	if err := json.Unmarshal(text, &v); err != nil {
		return nil, usageErrorf("%s is not JSON: %w", from, err)
	}
	return json.RawMessage(strings.TrimSpace(string(text))), nil
}
