package config

import "testing"

// TestJobSetNewerThan: an override change (a new Revision, the same
// Version) is newer; sets read without revisions order by Version.
func TestJobSetNewerThan(t *testing.T) {
	for _, tc := range []struct {
		a, b JobSet
		want bool
	}{
		{JobSet{Version: 5, Revision: 9}, JobSet{Version: 5, Revision: 7}, true},
		{JobSet{Version: 5, Revision: 7}, JobSet{Version: 5, Revision: 7}, false},
		{JobSet{Version: 8, Revision: 8}, JobSet{Version: 5, Revision: 9}, false},
		{JobSet{Version: 3}, JobSet{Version: 2}, true},
		{JobSet{Version: 2}, JobSet{Version: 2}, false},
	} {
		if got := tc.a.NewerThan(tc.b); got != tc.want {
			t.Errorf("%+v.NewerThan(%+v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
