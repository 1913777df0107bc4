package contract

import "testing"

// TestIsDateTime pins the date-time decisions of ajv-formats (full mode) that
// the contract relies on; the golden corpus checks many more against ajv.
func TestIsDateTime(t *testing.T) {
	tests := []struct {
		name string
		s    string
		want bool
	}{
		{"utc-millis", "2026-11-07T12:00:00.000Z", true},
		{"offset", "2026-11-07T12:00:00+05:30", true},
		{"offset-no-colon", "2026-11-07T12:00:00-0530", true},
		{"offset-hours-only", "2026-11-07T12:00:00+05", true},
		{"lower-case", "2026-11-07t12:00:00z", true},
		{"space-separator", "2026-11-07 12:00:00Z", true},
		{"leap-second", "2016-12-31T23:59:60Z", true},
		{"leap-second-offset", "2017-01-01T00:59:60+01:00", true},
		{"leap-year", "2024-02-29T00:00:00Z", true},
		{"fraction-rounds-to-leap", "2026-11-07T23:59:59.9999999999999999Z", true},
		{"bare-date", "2026-11-07", false},
		{"no-offset", "2026-11-07T12:00:00", false},
		{"feb-30", "2026-02-30T12:00:00Z", false},
		{"feb-29-not-leap", "1900-02-29T00:00:00Z", false},
		{"hour-25", "2026-11-07T25:00:00Z", false},
		{"minute-60", "2026-11-07T12:60:00Z", false},
		{"leap-second-not-2359", "2026-11-07T12:00:60Z", false},
		{"offset-hour-24", "2026-11-07T12:00:00+24:00", false},
		{"empty-fraction", "2026-11-07T12:00:00.Z", false},
		{"two-separators", "2026-11-07TT12:00:00Z", false},
		{"nel-is-not-js-space", "2026-11-07\u008512:00:00Z", false},
		{"fullwidth-digits", "２０２６-11-07T12:00:00Z", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isDateTime(tt.s); got != tt.want {
				t.Errorf("isDateTime(%q) = %v, want %v", tt.s, got, tt.want)
			}
			if err := validateDateTime(tt.s); (err == nil) != tt.want {
				t.Errorf("validateDateTime(%q) = %v", tt.s, err)
			}
		})
	}
	if err := validateDateTime(42); err != nil {
		t.Errorf("validateDateTime(42) = %v; non-strings are the type keyword's business", err)
	}
}
