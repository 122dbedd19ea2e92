package minimize

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		ob   Obligation
		want error // nil means valid
	}{
		{Obligation{Op: OpRemove, Path: "/name"}, nil},
		{Obligation{Op: OpRemove, Path: "/telecom/*/value"}, nil},
		{Obligation{Op: OpRemove, Path: "/a~1b/m~0n"}, nil},
		{Obligation{Op: OpRemove, Path: "/"}, nil}, // member named ""
		{Obligation{Op: OpMask, Path: "/identifier/0/value"}, nil},
		{Obligation{Op: OpMask, Path: "/x", Fn: "last4"}, nil},
		{Obligation{Op: OpMask, Path: ""}, nil},
		{Obligation{Op: OpGeneralize, Path: "/birthDate", Fn: "year"}, nil},
		{Obligation{Op: OpGeneralize, Path: "/address/*/postalCode", Fn: "zip3"}, nil},
		{Obligation{Op: OpGeneralize, Path: "/age", Fn: "age90"}, nil},
		{Obligation{Op: OpGeneralize, Path: "/birthDate", Fn: "birthyear90"}, nil},
		{Obligation{Op: OpScrub, Path: ""}, nil},
		{Obligation{Op: OpScrub, Path: "/text/div", Fn: "phone"}, nil},
		{Obligation{Op: OpScrub, Path: "", Fn: "phone,email,ssn,mrn,date"}, nil},
		{Obligation{Op: OpScrub, Path: "", Fn: "date,date"}, nil},
		{Obligation{Op: OpAllow, Path: "", Fn: "/gender"}, nil},
		{Obligation{Op: OpAllow, Path: "", Fn: "/gender,/address/*/state,/a~1b"}, nil},
		{Obligation{Op: OpAllow, Path: "/contained/*", Fn: "/code"}, nil},
		{Obligation{Op: OpAllow, Path: "", Fn: "/"}, nil}, // member named ""

		{Obligation{Op: "", Path: "/name"}, ErrUnknownOp},
		{Obligation{Op: "delete", Path: "/name"}, ErrUnknownOp},
		{Obligation{Op: "REMOVE", Path: "/name"}, ErrUnknownOp},
		{Obligation{Op: "redact", Path: "/name"}, ErrUnknownOp},
		{Obligation{Op: "bogus", Path: "no-slash", Fn: "x"}, ErrUnknownOp}, // op checked first

		{Obligation{Op: OpRemove, Path: ""}, ErrBadPath},
		{Obligation{Op: OpRemove, Path: "name"}, ErrBadPath},
		{Obligation{Op: OpMask, Path: "#/name"}, ErrBadPath},
		{Obligation{Op: OpMask, Path: "/a~2b"}, ErrBadPath},
		{Obligation{Op: OpMask, Path: "/a~"}, ErrBadPath},
		{Obligation{Op: OpScrub, Path: "/~/x"}, ErrBadPath},
		{Obligation{Op: OpGeneralize, Path: "birthDate", Fn: "year"}, ErrBadPath},

		{Obligation{Op: OpRemove, Path: "/name", Fn: "last4"}, ErrBadFn},
		{Obligation{Op: OpMask, Path: "/name", Fn: "year"}, ErrBadFn},
		{Obligation{Op: OpMask, Path: "/name", Fn: "last5"}, ErrBadFn},
		{Obligation{Op: OpGeneralize, Path: "/birthDate"}, ErrBadFn},
		{Obligation{Op: OpGeneralize, Path: "/birthDate", Fn: "month"}, ErrBadFn},
		{Obligation{Op: OpGeneralize, Path: "/birthDate", Fn: "YEAR"}, ErrBadFn},
		{Obligation{Op: OpScrub, Path: "", Fn: "names"}, ErrBadFn},
		{Obligation{Op: OpScrub, Path: "", Fn: "phone,"}, ErrBadFn},
		{Obligation{Op: OpScrub, Path: "", Fn: "phone, email"}, ErrBadFn},
		{Obligation{Op: OpScrub, Path: "", Fn: ","}, ErrBadFn},
		{Obligation{Op: OpAllow, Path: ""}, ErrBadFn},
		{Obligation{Op: OpAllow, Path: "", Fn: ","}, ErrBadFn},
		{Obligation{Op: OpAllow, Path: "", Fn: "/a,"}, ErrBadFn},
		{Obligation{Op: OpAllow, Path: "", Fn: "/a,,/b"}, ErrBadFn},
		{Obligation{Op: OpAllow, Path: "", Fn: "gender"}, ErrBadFn},
		{Obligation{Op: OpAllow, Path: "", Fn: "/a, /b"}, ErrBadFn},
		{Obligation{Op: OpAllow, Path: "", Fn: "/a~2"}, ErrBadFn},
		{Obligation{Op: "ALLOW", Path: "", Fn: "/a"}, ErrUnknownOp},
		{Obligation{Op: OpAllow, Path: "gender", Fn: "/a"}, ErrBadPath},
	}
	for _, tt := range tests {
		t.Run(tt.ob.String(), func(t *testing.T) {
			err := tt.ob.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Validate() = %v, want %v", err, tt.want)
			}
			// The message names the obligation.
			if !strings.Contains(err.Error(), tt.ob.String()) {
				t.Errorf("error %q does not name obligation %q", err, tt.ob.String())
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		ob   Obligation
		want string
	}{
		{Obligation{Op: OpRemove, Path: "/name"}, "remove:/name"},
		{Obligation{Op: OpGeneralize, Path: "/birthDate", Fn: "birthyear90"}, "generalize:/birthDate:birthyear90"},
		{Obligation{Op: OpMask, Path: "/telecom/*/value", Fn: "last4"}, "mask:/telecom/*/value:last4"},
		{Obligation{Op: OpScrub, Path: ""}, "scrub:"},
		{Obligation{Op: OpScrub, Path: "", Fn: "ssn,mrn"}, "scrub::ssn,mrn"},
		{Obligation{Op: OpAllow, Path: "", Fn: "/gender,/birthDate"}, "allow::/gender,/birthDate"},
	}
	for _, tt := range tests {
		if got := tt.ob.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.ob, got, tt.want)
		}
	}
}

func TestValidateAllReportsEveryProblem(t *testing.T) {
	if err := ValidateAll(nil); err != nil {
		t.Fatalf("ValidateAll(nil) = %v", err)
	}
	obs := []Obligation{
		{Op: OpRemove, Path: "/name"},
		{Op: "explode", Path: "/x"},
		{Op: OpMask, Path: "x"},
		{Op: OpScrub, Path: "", Fn: "names"},
	}
	err := ValidateAll(obs)
	for _, want := range []error{ErrUnknownOp, ErrBadPath, ErrBadFn} {
		if !errors.Is(err, want) {
			t.Errorf("ValidateAll error %v does not wrap %v", err, want)
		}
	}
	for _, want := range []string{"obligation 1:", "obligation 2:", "obligation 3:", "explode:/x"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateAll error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "obligation 0:") {
		t.Errorf("valid obligation reported: %v", err)
	}
}

func TestParsePointer(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"/", []string{""}, true},
		{"/a/b", []string{"a", "b"}, true},
		{"/a~1b", []string{"a/b"}, true},
		{"/m~0n", []string{"m~n"}, true},
		{"/~01", []string{"~1"}, true}, // RFC 6901: ~01 is "~1", not "/"
		{"/~10", []string{"/0"}, true},
		{"/telecom/*/value", []string{"telecom", "*", "value"}, true},
		{"//", []string{"", ""}, true},
		{"a", nil, false},
		{"/~", nil, false},
		{"/~2", nil, false},
	}
	for _, tt := range tests {
		got, err := parsePointer(tt.in)
		if (err == nil) != tt.ok || tt.ok && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parsePointer(%q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestArrayIndex(t *testing.T) {
	tests := []struct {
		seg  string
		n    int
		want int
		ok   bool
	}{
		{"0", 3, 0, true},
		{"2", 3, 2, true},
		{"3", 3, 0, false},
		{"01", 3, 0, false},
		{"-", 3, 0, false},
		{"", 3, 0, false},
		{"1a", 3, 0, false},
		{"99999999999999999999999", 3, 0, false},
	}
	for _, tt := range tests {
		got, ok := arrayIndex(tt.seg, tt.n)
		if got != tt.want || ok != tt.ok {
			t.Errorf("arrayIndex(%q, %d) = %d, %v; want %d, %v", tt.seg, tt.n, got, ok, tt.want, tt.ok)
		}
	}
}
