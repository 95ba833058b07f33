package deployment

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The kinds of setting value: each parses a text and checks it in Set, and
// prints what Set reads back in String.

// textValue is a string, matching a pattern if it has one (or empty,
// unless it is required).
type textValue struct {
	p        *string
	pattern  *pattern
	required bool
}

// pattern is what a text must match, and that in words.
type pattern struct {
	re   *regexp.Regexp
	what string
}

func text(p *string, pt *pattern) Value { return textValue{p, pt, false} }

func required(p *string, pt *pattern) Value { return textValue{p, pt, true} }

func (v textValue) String() string { return *v.p }
func (v textValue) Type() string   { return "string" }

func (v textValue) Set(s string) error {
	if s == "" && v.required {
		return errors.New("must not be empty")
	}
	if s != "" && v.pattern != nil && !v.pattern.re.MatchString(s) {
		return fmt.Errorf("%q is not %s", s, v.pattern.what)
	}
	*v.p = s
	return nil
}

// listValue is a comma-separated list ("": none). Without an item pattern
// its empty items are dropped; with one, every item must match it, empty or
// not.
type listValue struct {
	p    *[]string
	item *pattern
}

func list(p *[]string) Value { return listValue{p, nil} }

func listOf(p *[]string, item *pattern) Value { return listValue{p, item} }

func (v listValue) String() string { return strings.Join(*v.p, ",") }
func (v listValue) Type() string   { return "list" }

func (v listValue) Set(s string) error {
	var out []string
	if strings.TrimSpace(s) == "" {
		*v.p = out // none
		return nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		switch {
		case v.item != nil && !v.item.re.MatchString(item):
			return fmt.Errorf("%q is not %s", item, v.item.what)
		case item != "":
			out = append(out, item)
		}
	}
	*v.p = out
	return nil
}

// numberValue is a whole number from min to max.
type numberValue struct {
	p        *int
	min, max int
}

func number(p *int, lo, hi int) Value { return numberValue{p, lo, hi} }

func (v numberValue) String() string { return strconv.Itoa(*v.p) }
func (v numberValue) Type() string   { return "int" }

func (v numberValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	if n < 0 && v.min == 0 {
		return errors.New("must not be negative")
	}
	if n < v.min || n > v.max {
		return fmt.Errorf("must be from %d to %d, not %d", v.min, v.max, n)
	}
	*v.p = n
	return nil
}

// boolValue is true or false.
type boolValue struct{ p *bool }

func boolean(p *bool) Value { return boolValue{p} }

func (v boolValue) String() string { return strconv.FormatBool(*v.p) }
func (v boolValue) Type() string   { return "bool" }

func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not true or false", s)
	}
	*v.p = b
	return nil
}

// durationValue is a Go duration (30s, 5m, 24h), at least min (0: not
// negative, where 0 leaves the setting to the workflow files).
type durationValue struct {
	p   *time.Duration
	min time.Duration
}

func duration(p *time.Duration, lo time.Duration) Value { return durationValue{p, lo} }

func (v durationValue) String() string { return ShortDuration(*v.p) }
func (v durationValue) Type() string   { return "duration" }

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a duration like 30s, 5m or 24h", s)
	}
	if d < v.min {
		if v.min == 0 {
			return errors.New("must not be negative")
		}
		return fmt.Errorf("must be at least %s, not %s", ShortDuration(v.min), ShortDuration(d))
	}
	*v.p = d
	return nil
}

// secondsValue is a whole number of seconds from 0 to max, kept as a
// duration.
type secondsValue struct {
	p   *time.Duration
	max int
}

func seconds(p *time.Duration, hi int) Value { return secondsValue{p, hi} }

func (v secondsValue) String() string { return strconv.Itoa(int(*v.p / time.Second)) }
func (v secondsValue) Type() string   { return "seconds" }

func (v secondsValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > v.max {
		return fmt.Errorf("a whole number of seconds from 0 to %d, not %q", v.max, s)
	}
	*v.p = time.Duration(n) * time.Second
	return nil
}

// ShortDuration prints a duration without its zero tails: 24h, 1m, 1h30m,
// 15s, 0s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
