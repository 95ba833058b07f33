package hostile

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// sizes are the lengths tried: the smallest, and either side of the inline
// limit and of SQS's.
var sizes = []int{2, 3, 7, 100, 32<<10 - 1, 32 << 10, 32<<10 + 1, 256<<10 - 1, 256 << 10, 256<<10 + 1}

// A value's text is valid UTF-8 of exactly its size, holds every kind of
// character encoders change, and is the same for a seed.
func TestTextIsValidUTF8OfItsSizeAndHoldsEveryKind(t *testing.T) {
	for _, n := range append(sizes, 0, 1) {
		s := Text(1, n)
		require.Len(t, s, n)
		require.True(t, utf8.ValidString(s))
	}
	s := Text(7, 64<<10)
	for _, kind := range []string{"<", ">", "&", "\x00", "\x01", "\x1f", "\ufffd", "\u2028", "\u2029", "é", "🙂", `"`, `\`} {
		require.Contains(t, s, kind)
	}
	require.Equal(t, s, Text(7, 64<<10))
	require.NotEqual(t, s, Text(8, 64<<10))
}

// A quoted value is a JSON string that decodes to the value, carries no
// character SQS refuses (its control characters are \u escapes), keeps
// <, > and & raw, and is QuoteLen long; TextQuoted's is exactly its size.
func TestAQuotedValueIsWhatSQSTakesAndDecodesToIt(t *testing.T) {
	for _, n := range sizes {
		s := TextQuoted(uint64(n), n)
		q := Quote(s)
		require.Len(t, q, n)
		require.Equal(t, len(q), QuoteLen(s))
		var back string
		require.NoError(t, json.Unmarshal([]byte(q), &back))
		require.Equal(t, s, back)
		require.True(t, sqsTakes(q), "every character one SQS takes")
		if n > 1000 {
			require.Contains(t, q, "<")
			require.Contains(t, q, `\u0001`)
			m, err := json.Marshal(s)
			require.NoError(t, err)
			require.Greater(t, len(m), n, "json.Marshal, its HTML escapes on, writes it longer")
		}
	}
	require.Equal(t, `"\ufffd"`, strings.ReplaceAll(Quote("\xff"), "\ufffd", `\ufffd`), "invalid UTF-8: a raw U+FFFD")
}

// A body is its size, is not JSON, and holds raw control bytes and invalid
// UTF-8; BodyMarshalled's JSON string, as the product keeps it
// (encoding/json's Encoder, its HTML escapes off), is exactly its size.
func TestABodyIsAnythingAndMarshalsToItsSize(t *testing.T) {
	for _, n := range append(sizes, 0, 1) {
		require.Len(t, Body(3, n), n)
	}
	b := Body(3, 8<<10)
	require.False(t, json.Valid(b))
	require.False(t, utf8.Valid(b))
	require.Contains(t, string(b), "\x01")
	for _, n := range sizes {
		var m bytes.Buffer
		enc := json.NewEncoder(&m)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(string(BodyMarshalled(uint64(n), n))))
		require.Equal(t, n, m.Len()-1) // less Encode's newline
	}
}

// MarshalLen is the length of what encoding/json's Encoder writes with its
// HTML escapes off (as the product keeps an answer that is not JSON), for
// every byte, every piece and random bytes.
func TestMarshalLenIsEncodingJSONs(t *testing.T) {
	check := func(b []byte) {
		var m bytes.Buffer
		enc := json.NewEncoder(&m)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(string(b)))
		require.Equal(t, m.Len()-1, MarshalLen(b), "%q", b) // less Encode's newline
	}
	for c := range 256 {
		check([]byte{byte(c)})
	}
	for _, p := range bodyPieces {
		check([]byte(p))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, rng.IntN(64))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		check(b)
	}
}

// sqsTakes is SQS's rule for a body's characters: #x9 | #xA | #xD | #x20
// to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF, valid UTF-8.
func sqsTakes(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd") {
			return false
		}
		switch {
		case r == 0x9, r == 0xA, r == 0xD, r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

// BenchmarkBodyAtTheLimits is a 16 MB answer made: go test -run '^$' -bench
// . ./shared/devkit/hostile.
func BenchmarkBodyAtTheLimits(b *testing.B) {
	for b.Loop() {
		BodyMarshalled(1, 16<<20)
	}
}

// Marshal keeps <, > and & raw, and a raw message as it is (U+2028 too).
func TestMarshalEscapesNoMoreThanItMust(t *testing.T) {
	raw := json.RawMessage(`{"a":"<&>` + "\u2028\ufffd" + `\u0001"}`)
	s, err := Marshal(struct {
		S string          `json:"s"`
		R json.RawMessage `json:"r"`
	}{"<b>&", raw})
	require.NoError(t, err)
	require.Equal(t, `{"s":"<b>&","r":`+string(raw)+`}`, s)
}
