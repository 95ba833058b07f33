package notify_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/notify"
)

const (
	localPrefix = "http://127.0.0.1:4566/123456789012/sas-dev-client-"
	awsPrefix   = "https://sqs.us-east-1.amazonaws.com/123456789012/shop-client-"
)

var allowed = notify.Allowed{localPrefix, awsPrefix}

func TestAllowedAcceptsOnlyQueuesUnderAPrefix(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		url, why string // why: "" accepted, else a part of the reason
	}{
		"local queue":              {localPrefix + "mine", ""},
		"aws queue":                {awsPrefix + "orders_42", ""},
		"the prefix itself":        {localPrefix[:len(localPrefix)-1], "must be a queue of"},
		"mixed case host":          {"https://SQS.us-east-1.AmazonAWS.com/123456789012/shop-client-a", ""},
		"default port written out": {"https://sqs.us-east-1.amazonaws.com:443/123456789012/shop-client-a", ""},
		"traversal":                {localPrefix + "../sas-dev-orders", "nothing more"},
		"traversal to a name":      {localPrefix + "..", "is not a queue name"},
		"encoded traversal":        {localPrefix + "%2e%2e/sas-dev-orders", "percent-escape"},
		"encoded slash":            {localPrefix + "a%2Fb", "percent-escape"},
		"userinfo":                 {"http://127.0.0.1:4566@evil.example/123456789012/sas-dev-client-a", "userinfo"},
		"at another host":          {"https://sqs.us-east-1.amazonaws.com@evil.example/123456789012/shop-client-a", "userinfo"},
		"trailing slash":           {localPrefix + "a/", "nothing more"},
		"extra segment":            {localPrefix + "a/b", "nothing more"},
		"query":                    {localPrefix + "a?Action=DeleteQueue", "query"},
		"fragment":                 {localPrefix + "a#x", "fragment"},
		"backslash":                {`http://127.0.0.1:4566\123456789012/sas-dev-client-a`, "backslash"},
		"other account":            {"http://127.0.0.1:4566/210987654321/sas-dev-client-a", "must be a queue of"},
		"other region host":        {"https://sqs.eu-west-1.amazonaws.com/123456789012/shop-client-a", "must be a queue of"},
		"other port":               {"http://127.0.0.1:4567/123456789012/sas-dev-client-a", "must be a queue of"},
		"other scheme":             {"http://sqs.us-east-1.amazonaws.com/123456789012/shop-client-a", "must be a queue of"},
		"ipv6 literal":             {"http://[::1]:4566/123456789012/sas-dev-client-a", "must be a queue of"},
		"host with trailing dot":   {"http://127.0.0.1.:4566/123456789012/sas-dev-client-a", "must be a queue of"},
		"other prefix":             {"http://127.0.0.1:4566/123456789012/sas-dev-orders", "must be a queue of"},
		"prefix in other case":     {"http://127.0.0.1:4566/123456789012/SAS-DEV-CLIENT-a", "must be a queue of"},
		"name too long":            {localPrefix + strings.Repeat("a", 80), "is not a queue name"},
		"name with a dot":          {localPrefix + "a.b", "is not a queue name"},
		"fifo queue":               {localPrefix + "a.fifo", "FIFO"},
		"not a url":                {"sas-dev-client-a", "http(s) URL"},
		"other scheme entirely":    {"file:///123456789012/sas-dev-client-a", "http(s) URL"},
		"short account":            {"http://127.0.0.1:4566/1234/sas-dev-client-a", "account"},
		"empty":                    {"", "http(s) URL"},
		"huge":                     {localPrefix + strings.Repeat("a", 600), "longer than"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := allowed.Check(c.url)
			if c.why == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), c.why)
		})
	}
}

func TestAllowedWithNoEntriesRefusesEveryQueue(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, notify.Allowed(nil).Check(localPrefix+"a"), "allows no reply queues")
}

func TestAllowedValidateRefusesAnEntryThatIsNotAQueuePrefix(t *testing.T) {
	t.Parallel()
	require.NoError(t, allowed.Validate())
	for _, bad := range []string{"sas-dev-client-", "http://127.0.0.1:4566/123456789012/", "http://127.0.0.1:4566/sas-dev-client-",
		"http://127.0.0.1:4566/123456789012/a/b", "http://user@127.0.0.1:4566/123456789012/a"} {
		require.Error(t, notify.Allowed{bad}.Validate(), bad)
	}
}

// Run one: go test ./shared/notify -fuzz FuzzAllowedCheck -fuzztime 30s
// (plain go test runs the seeds).
func FuzzAllowedCheck(f *testing.F) {
	for _, s := range []string{localPrefix + "a", localPrefix + "../sas-dev-orders", localPrefix + "%2e%2e/x",
		"http://127.0.0.1:4566@evil/123456789012/sas-dev-client-a", "http://[::1]:4566/123456789012/sas-dev-client-a",
		awsPrefix + "b", "HTTPS://SQS.US-EAST-1.AMAZONAWS.COM/123456789012/shop-client-c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if allowed.Check(raw) != nil {
			return
		}
		// Whatever was accepted names, as an HTTP client resolves it, a
		// queue of an allowed endpoint and account, under its prefix.
		u, err := url.Parse(raw)
		require.NoError(t, err)
		require.Empty(t, u.User)
		require.Empty(t, u.RawQuery)
		require.Empty(t, u.Fragment)
		ref := u.ResolveReference(&url.URL{}) // what a client would request, dot segments removed
		require.Equal(t, u.Path, ref.Path, "no dot segments")
		base := strings.ToLower(u.Scheme + "://" + u.Host)
		ok := false
		for _, p := range allowed {
			pu, _ := url.Parse(p)
			account, prefix, _ := strings.Cut(strings.TrimPrefix(pu.Path, "/"), "/")
			host := strings.ToLower(pu.Scheme + "://" + pu.Host)
			if (base == host || base == host+":443") && strings.HasPrefix(u.Path, "/"+account+"/"+prefix) {
				ok = true
			}
		}
		require.True(t, ok, "%q is under no allowed prefix", raw)
		require.Equal(t, 2, strings.Count(u.Path, "/"))
	})
}
