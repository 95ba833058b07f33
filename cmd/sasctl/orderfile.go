package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sas-go/sas/shared/message"
)

// maxOrderLine is the longest line of an orders file, its line end aside:
// one order, as large as an order may be (message.MaxOrderBytes).
const maxOrderLine = message.MaxOrderBytes

// readOrders reads order bodies: a JSON array of orders, or one per line,
// from the file at path or stdin ("-"). A line over maxOrderLine is an
// error naming it, never a file read short.
func readOrders(path string, stdin io.Reader) ([]string, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("read orders: %w", err)
		}
		defer f.Close()
		r = f
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if first, err := firstByte(br); err == nil && first == '[' {
		var raw []json.RawMessage
		if err := json.NewDecoder(br).Decode(&raw); err != nil {
			return nil, fmt.Errorf("read orders: the input starts like a JSON array but is not one: %w", err)
		}
		out := make([]string, len(raw))
		for i, m := range raw {
			out[i] = string(m)
		}
		return out, nil
	}
	out, err := orderLines(br, path)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read orders: no orders in %s", path)
	}
	return out, nil
}

// firstByte is the first byte of br that is not white space, left unread.
func firstByte(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
			return b, br.UnreadByte()
		}
	}
}

// errLongLine is a line of an orders file over maxOrderLine.
var errLongLine = fmt.Errorf("over the %d bytes an order may be (one order a line)", maxOrderLine)

// orderLines are the orders of r, one a line (blank lines skipped). A
// line over maxOrderLine, or a read that fails, is an error naming its
// line.
func orderLines(r io.Reader, path string) ([]string, error) {
	sc := bufio.NewScanner(r)
	// A line, its "\r\n", and a byte more to know a longer one.
	sc.Buffer(make([]byte, 0, 64<<10), maxOrderLine+3)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		advance, line, err := bufio.ScanLines(data, atEOF)
		if len(line) > maxOrderLine || (advance == 0 && len(data) > maxOrderLine+2) {
			return 0, nil, errLongLine
		}
		return advance, line, err
	})
	var out []string
	n := 0
	for sc.Scan() {
		n++
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			out = append(out, string(line))
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = errLongLine
		}
		return nil, fmt.Errorf("read orders: %s, line %d: %w", path, n+1, err)
	}
	return out, nil
}
