package operator

import (
	"fmt"
	"strings"
	"time"
)

// Moment is a time a search names: as it is, or as an age back from now.
type Moment struct {
	At  time.Time
	Ago time.Duration
}

// ParseMoment reads a moment: an RFC 3339 time (2026-12-07T10:00:00Z) or
// an age back from now (ParseAge: 10m, 1h, 2d).
func ParseMoment(v string) (Moment, error) {
	if at, err := time.Parse(time.RFC3339, v); err == nil {
		return Moment{At: at}, nil
	}
	d, err := ParseAge(v)
	if err != nil {
		return Moment{}, fmt.Errorf("%q is neither a time (2026-12-07T10:00:00Z) nor an age (10m, 1h, 2d)", v)
	}
	return Moment{Ago: d}, nil
}

// IsZero reports whether m names no time.
func (m Moment) IsZero() bool { return m.At.IsZero() && m.Ago == 0 }

// Of is m as of now (zero if m names none).
func (m Moment) Of(now time.Time) time.Time {
	if m.Ago > 0 {
		return now.Add(-m.Ago)
	}
	return m.At
}

// String writes m as ParseMoment reads it.
func (m Moment) String() string {
	if m.Ago > 0 {
		return Duration(m.Ago).String()
	}
	if m.At.IsZero() {
		return ""
	}
	return m.At.UTC().Format(time.RFC3339)
}

// readMore reads the search's end times and field from a URL query's
// values (get).
func (s *Search) readMore(get func(string) string) error {
	for _, m := range []struct {
		key string
		to  *Moment
	}{{QueryEndedAfter, &s.EndedAfter}, {QueryEndedBefore, &s.EndedBefore}} {
		if v := get(m.key); v != "" {
			var err error
			if *m.to, err = ParseMoment(v); err != nil {
				return fmt.Errorf("%s: %w", m.key, err)
			}
		}
	}
	if v := get(QueryField); v != "" {
		field, value, err := ParseField(v)
		if err != nil {
			return fmt.Errorf("%s: %w", QueryField, err)
		}
		s.Field, s.Value = field, value
	}
	return nil
}

// ParseField reads a searchable field's equality, name=value (the value
// as it is, spaces and = included).
func ParseField(v string) (field, value string, err error) {
	field, value, ok := strings.Cut(v, "=")
	field = strings.TrimSpace(field)
	if !ok || field == "" {
		return "", "", fmt.Errorf("%q: write a searchable field's value as name=value, such as customerId=c-1", v)
	}
	return field, value, nil
}

// writeMore writes the search's parts readMore reads, with set.
func (s Search) writeMore(set func(k, v string)) {
	set(QueryVersion, s.Version)
	set(QueryStep, s.Step)
	set(QueryAgent, s.Agent)
	set(QueryReason, s.Reason)
	set(QueryEndedAfter, s.EndedAfter.String())
	set(QueryEndedBefore, s.EndedBefore.String())
	if s.Field != "" {
		set(QueryField, s.Field+"="+s.Value)
	}
	if s.Scan {
		set(QueryScan, "1")
	}
}
