package payload

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Renew writes every payload of an order again in place, so that the
// bucket's expiry (days after an object's last write) counts from now: a
// resubmitted order keeps them for its new round.
func (s *Store) Renew(ctx context.Context, orderID string) (int, error) {
	if s == nil {
		return 0, nil
	}
	n := 0
	p := s3.NewListObjectsV2Paginator(s.api, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(OrderPrefix(orderID))})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("list the payloads of %s: %w", orderID, err)
		}
		for _, o := range page.Contents {
			_, err := s.api.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.bucket, Key: o.Key,
				CopySource: aws.String(copySource(s.bucket, aws.ToString(o.Key))), MetadataDirective: types.MetadataDirectiveReplace,
				ContentType: aws.String(contentType(aws.ToString(o.Key)))})
			if err != nil {
				return n, fmt.Errorf("renew payload s3://%s/%s: %w", s.bucket, aws.ToString(o.Key), err)
			}
			n++
		}
	}
	return n, nil
}

// copySource is the object at key in bucket as CopyObject's copy source
// names it: bucket/key, URL-encoded, as S3 requires (a key's "#" would
// end the URL there, its "?" start a query, its "%" or "+" be read as an
// escape). Every byte but an unreserved one (RFC 3986) and the "/" between
// the key's parts is written %XX.
func copySource(bucket, key string) string {
	const hex = "0123456789ABCDEF"
	src := bucket + "/" + key
	var b strings.Builder
	b.Grow(len(src))
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~', c == '/':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		}
	}
	return b.String()
}
