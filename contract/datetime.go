package contract

import (
	"errors"
	"strconv"
)

// errNotDateTime is what the date-time format assertion reports; the adapter
// turns it into ajv's `must match format "date-time"`.
var errNotDateTime = errors.New("not an RFC 3339 date-time")

// validateDateTime is the "date-time" format of the contracts: it decides
// exactly as ajv-formats 3 does in its default (full) mode, so that the Go
// validator and the JS SDK agree on every string. Values that are not strings
// are not its business (the type keyword handles them).
func validateDateTime(v any) error {
	s, ok := v.(string)
	if !ok || isDateTime(s) {
		return nil
	}
	return errNotDateTime
}

// isDateTime is ajv-formats' date_time with a required time zone: the string
// splits at exactly one separator ('t', 'T' or a JavaScript whitespace
// character) into an RFC 3339 full-date and a time with offset.
func isDateTime(s string) bool {
	sep, sepLen := -1, 0
	for i, r := range s {
		if r == 't' || r == 'T' || isJSSpace(r) {
			if sep >= 0 {
				return false
			}
			sep, sepLen = i, len(string(r))
		}
	}
	return sep >= 0 && isDate(s[:sep]) && isTime(s[sep+sepLen:])
}

// isJSSpace reports whether r matches JavaScript's \s.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

var daysInMonth = [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// isDate is ajv-formats' date: YYYY-MM-DD with a real month and day.
func isDate(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' || !isDigits(s[:4]) || !isDigits(s[5:7]) || !isDigits(s[8:]) {
		return false
	}
	year, month, day := atoi(s[:4]), atoi(s[5:7]), atoi(s[8:])
	if month < 1 || month > 12 || day < 1 {
		return false
	}
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return day <= 29
	}
	return day <= daysInMonth[month]
}

// isTime is ajv-formats' time with strictTimeZone: hh:mm:ss[.frac] and then
// z, or an offset ±hh, ±hhmm or ±hh:mm. A second of 60 (or more, below 61) is
// valid only when the time is 23:59 in UTC, as ajv-formats computes it.
func isTime(s string) bool {
	if len(s) < 8 || s[2] != ':' || s[5] != ':' || !isDigits(s[:2]) || !isDigits(s[3:5]) || !isDigits(s[6:8]) {
		return false
	}
	end := 8
	if end < len(s) && s[end] == '.' {
		j := end + 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == end+1 {
			return false
		}
		end = j
	}
	sign, tzH, tzM, ok := parseOffset(s[end:])
	if !ok || tzH > 23 || tzM > 59 {
		return false
	}
	hr, min := atoi(s[:2]), atoi(s[3:5])
	sec, err := strconv.ParseFloat(s[6:end], 64) // JavaScript's +"59.999…"
	if err != nil {
		return false
	}
	if hr <= 23 && min <= 59 && sec < 60 {
		return true
	}
	utcMin := min - tzM*sign
	utcHr := hr - tzH*sign
	if utcMin < 0 {
		utcHr--
	}
	return (utcHr == 23 || utcHr == -1) && (utcMin == 59 || utcMin == -1) && sec < 61
}

// parseOffset reads z, Z, ±hh, ±hhmm or ±hh:mm; the time zone is required.
func parseOffset(s string) (sign, hours, minutes int, ok bool) {
	if s == "z" || s == "Z" {
		return 1, 0, 0, true
	}
	if len(s) < 3 || (s[0] != '+' && s[0] != '-') || !isDigits(s[1:3]) {
		return 0, 0, 0, false
	}
	sign = 1
	if s[0] == '-' {
		sign = -1
	}
	rest := s[3:]
	if len(rest) == 3 && rest[0] == ':' {
		rest = rest[1:]
	}
	switch {
	case rest == "":
		return sign, atoi(s[1:3]), 0, true
	case len(rest) == 2 && isDigits(rest):
		return sign, atoi(s[1:3]), atoi(rest), true
	}
	return 0, 0, 0, false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// atoi converts a short run of ASCII digits that isDigits accepted.
func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}
