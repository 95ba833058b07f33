package main

import "testing"

// Ratios, sizes and times print with a precision that fits them.
func TestTheFiguresPrintWithAPrecisionThatFits(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ratio(2.8, 72.3), "×0.039"}, {ratio(200, 72.3), "×2.77"}, {ratio(1, 0), "–"},
		{thousands(868.4), "868"}, {thousands(1002), "1,002"}, {thousands(1234567), "1,234,567"},
		{seconds(0.072), "0.07"}, {seconds(30.84), "30.8"}, {num(3.84), "3.8"}, {num(243.4), "243"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}
