package explore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A search that misses an order of its customer (stored by then, while
// the orders run), finds one of another, or finds one twice is caught; one
// that finds an order sent and not yet stored is not.
func TestASearchThatFindsWronglyIsCaught(t *testing.T) {
	must, may := []string{"x1-0"}, []string{"x1-0", "x1-1"}
	require.Empty(t, foundWrong("c-hot", must, may, []string{"x1-0"}))
	require.Empty(t, foundWrong("c-hot", must, may, []string{"x1-1", "x1-0"}), "x1-1 sent, not yet stored: it may be found")
	require.Equal(t, []string{
		"a search finds only the orders of its value: customerId=c-hot found x1-2",
		"a search finds each order once: customerId=c-hot found x1-2 twice",
		"a search finds every order of its value: customerId=c-hot missed x1-0",
	}, foundWrong("c-hot", must, may, []string{"x1-2", "x1-2"}))
}
