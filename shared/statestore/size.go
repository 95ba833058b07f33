package statestore

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/message"
)

// ItemSize is an item's size as DynamoDB counts it for capacity units (its
// "item sizes and formats" rules): attribute names and values, a number at
// one byte per two significant digits plus one, a list or map at three
// bytes plus one per element. A write is billed a unit per started KB of the
// larger of the item before and after it.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return numberSize(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return sum(x.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sum(x.Value, numberSize)
	case *types.AttributeValueMemberL:
		return 3 + sum(x.Value, func(e types.AttributeValue) int { return 1 + valueSize(e) })
	case *types.AttributeValueMemberM:
		return 3 + len(x.Value) + ItemSize(x.Value)
	}
	return 0
}

func numberSize(s string) int {
	digits := strings.Trim(strings.NewReplacer("-", "", ".", "").Replace(s), "0")
	return (len(digits)+1)/2 + 1
}

func sum[T any](xs []T, f func(T) int) int {
	n := 0
	for _, x := range xs {
		n += f(x)
	}
	return n
}

// What the state item keeps of a failure's text. A service's refusal may be
// 64 KB and a forEach step has up to 100 items, so every text a write stores
// is cut: the order's last error and a cancel's reason at MaxErrorBytes, a
// record's last error at MaxRecordErrorBytes, an incident's reason at
// MaxIncidentBytes, and a record keeps the incidents of its first
// MaxIncidents failures in a round (later ones raise its failure count and
// replace its last error). The whole text is in the log of the handler that
// met it. With these, the state item of the largest order stays under 100
// KB whatever its services answer.
const (
	MaxErrorBytes       = 512
	MaxRecordErrorBytes = 256
	MaxIncidentBytes    = 128
	MaxIncidents        = 3
)

// clip is s as DynamoDB keeps it (its bytes that are not UTF-8 each
// U+FFFD, three bytes, as the SDK sends them) cut to at most n bytes, on a
// character boundary, ending in "…" when cut: weighed as it is kept.
func clip(s string, n int) string { return message.Clip(strings.ToValidUTF8(s, "\uFFFD"), n) }
