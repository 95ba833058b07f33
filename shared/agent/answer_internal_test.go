package agent

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// An answer that is not JSON is kept as encoding/json quotes it with its
// HTML escapes off, and its kept length is counted exactly, with no copy
// made: whatever bytes it holds (each ASCII byte, invalid UTF-8, U+2028,
// U+FFFD, text of every kind at random).
func TestTextIsQuotedAsEncodingJSONQuotesItWithoutHTMLEscapes(t *testing.T) {
	t.Parallel()
	cases := [][]byte{nil, []byte("<a href='x'>&amp;</a>"), []byte("\u2028\u2029\ufffd\xff\xfe\xc3"), []byte("é\x7f\"\\/")}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	cases = append(cases, all)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"<", ">", "&", "\x00", "\x1f", "\n", "\t", "\b", "\f", "\r", "\"", "\\", "a", "é", "\u2028", "\xff", "\xe2\x80", "😀"}
	for range 2000 {
		var b []byte
		for range rng.IntN(40) {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		cases = append(cases, b)
	}
	for _, c := range cases {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(string(c)))
		got := appendText(nil, c)
		require.Equal(t, bytes.TrimSuffix(want.Bytes(), []byte("\n")), got, "%q", c)
		require.Equal(t, len(got), textLen(c), "%q", c)
	}
	a := answerOf([]byte("<>&"))
	require.Equal(t, `"<>&"`, string(a.kept()), "no HTML escapes: a byte each")
	j := answerOf([]byte(`{"a":"<"}`))
	require.Equal(t, `{"a":"<"}`, string(j.kept()), "JSON kept as it is")
	require.Equal(t, 9, j.keptLen())
}
