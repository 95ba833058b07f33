package workflow

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/itchyny/gojq"
	"github.com/stretchr/testify/require"
)

// An expression's value is weighed as gojq encodes it, exactly, whatever it
// holds; and a limit is passed exactly when its encoding is longer.
func TestAValueIsWeighedAsItIsEncoded(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 9))
	pieces := []string{"a", "<", "&", "\"", "\\", "\x00", "\x1f", "\x7f", "\n", "\b", "é", "\u2028", "\ufffd", "\xff", "\xe2\x80", "😀"}
	floats := []float64{0, -0.5, 1e-7, 1e-6, 1e20, 1e21, 123.456, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, 5e-324, -1e-10}
	text := func() string {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(10); {
		case k == 0:
			return nil
		case k == 1:
			return rng.IntN(2) == 0
		case k == 2:
			return rng.IntN(1<<40) - 1<<39
		case k == 3:
			return floats[rng.IntN(len(floats))]
		case k == 4:
			return new(big.Int).Lsh(big.NewInt(int64(rng.IntN(1000))-500), 100)
		case k == 5:
			return json.Number("12.5e3")
		case k < 8 || depth > 3:
			return text()
		case k == 8:
			a := make([]any, rng.IntN(5))
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		default:
			m := map[string]any{}
			for range rng.IntN(5) {
				m[text()] = value(depth + 1)
			}
			return m
		}
	}
	for range 5000 {
		v := value(0)
		out, err := gojq.Marshal(v)
		require.NoError(t, err)
		n, ok := encodedLen(v, math.MaxInt)
		require.True(t, ok)
		require.Equal(t, len(out), n, "%s", out)
		_, ok = encodedLen(v, len(out))
		require.True(t, ok, "at the limit")
		if len(out) > 0 {
			_, ok = encodedLen(v, len(out)-1)
			require.False(t, ok, "a byte over: %s", out)
		}
	}
}
