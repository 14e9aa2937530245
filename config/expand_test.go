package config

import (
	"errors"
	"testing"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"SHARDCRON_JOB_TOKEN": "s3cret", "SHARDCRON_JOB_EMPTY": "", "HOME": "/root"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		in, want string
		err      error
	}{
		{"plain", "plain", nil},
		{"Bearer ${SHARDCRON_JOB_TOKEN}", "Bearer s3cret", nil},
		{"${SHARDCRON_JOB_TOKEN}${SHARDCRON_JOB_TOKEN}", "s3crets3cret", nil},
		{"[${SHARDCRON_JOB_EMPTY}]", "[]", nil},
		{"price $$5 and $${SHARDCRON_JOB_TOKEN}", "price $5 and ${SHARDCRON_JOB_TOKEN}", nil},
		{"$HOME $ trailing $", "$HOME $ trailing $", nil},
		{"${HOME}", "", ErrVariableNotAllowed},
		{"${SHARDCRON_JOB_}", "", ErrVariableNotAllowed},
		{"${SHARDCRON_ETCD_PASSWORD}", "", ErrVariableNotAllowed},
		{"${SHARDCRON_JOB_MISSING}", "", ErrVariableUnset},
		{"${SHARDCRON_JOB_TOKEN", "", ErrVariableSyntax},
		{"${}", "", ErrVariableSyntax},
		{"${SHARDCRON_JOB_X:-default}", "", ErrVariableSyntax},
	}
	for _, tc := range tests {
		got, err := Expand(tc.in, lookup)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("Expand(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestDuration(t *testing.T) {
	for in, want := range map[string]string{"30s": "30s", "1m0s": "1m", "90m": "1h30m", "2h": "2h", "500ms": "500ms", "0": "0s", "1h0m1s": "1h0m1s"} {
		d, err := ParseDuration(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseDuration(%q) = %v (%v), want %s", in, d, err, want)
		}
		var back Duration
		b, _ := d.MarshalJSON()
		if err := back.UnmarshalJSON(b); err != nil || back != d {
			t.Errorf("JSON round trip of %v: %s -> %v, %v", d, b, back, err)
		}
	}
	for _, in := range []string{"-1s", "30", "soon", "", "9999999999h"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted", in)
		}
	}
	var d Duration
	if err := d.UnmarshalJSON([]byte(`30000000000`)); err != nil || d.D().String() != "30s" {
		t.Errorf("nanoseconds: %v %v", d, err)
	}
	if err := d.UnmarshalJSON([]byte(`"-5s"`)); err == nil {
		t.Error("negative JSON duration accepted")
	}
}
