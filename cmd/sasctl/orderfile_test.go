package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/message"
)

// orderOf is an order of exactly n bytes.
func orderOf(id string, n int) string {
	head := fmt.Sprintf(`{"orderId":%q,"doc":"`, id)
	return head + strings.Repeat("d", n-len(head)-2) + `"}`
}

// A file of orders one a line takes a line of the largest order (16 MB),
// with either line end, and names the line of one a byte over it: it was
// "no orders in FILE" (the scanner's error dropped, at 1 MiB), or a file
// read short at 64 MiB.
func TestAnOrdersFileTakesLinesOfTheLargestOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	largest := orderOf("o-16mb", message.MaxOrderBytes)
	small := orderOf("o-small", 100)
	file := filepath.Join(dir, "orders.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(small+"\r\n"+largest+"\r\n\n"+largest+"\n"+largest), 0o600))
	got, err := readOrders(file, nil)
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.Equal(t, small, got[0])
	for _, o := range got[1:] {
		require.Len(t, o, message.MaxOrderBytes)
	}

	for name, tail := range map[string]string{"ended": "\n", "last": ""} {
		over := filepath.Join(dir, "over-"+name+".jsonl")
		require.NoError(t, os.WriteFile(over, []byte(small+"\n\n"+orderOf("o-over", message.MaxOrderBytes+1)+tail), 0o600))
		_, err = readOrders(over, nil)
		require.EqualError(t, err, fmt.Sprintf("read orders: %s, line 3: over the %d bytes an order may be (one order a line)",
			over, message.MaxOrderBytes), name)
	}

	_, err = readOrders("-", strings.NewReader("\n \n"))
	require.EqualError(t, err, "read orders: no orders in -")
	got, err = readOrders("-", strings.NewReader(" \n["+small+","+small+"]\n"))
	require.NoError(t, err)
	require.Equal(t, []string{small, small}, got, "a JSON array")
}
