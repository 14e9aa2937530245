package replica

import (
	"testing"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/dashboard"
)

// TestRunsPageBoundsAgree: GET /api/v1/jobs/{name}/runs answers through
// control.History, and `shardcron history` calls it too, so the API's
// paging bounds are control's. The dashboard keeps its own copy because it
// imports nothing that reaches etcd; this test is where the two meet.
func TestRunsPageBoundsAgree(t *testing.T) {
	if dashboard.DefaultRuns != control.DefaultHistory || dashboard.MaxRuns != control.MaxHistory {
		t.Fatalf("runs API default %d max %d, history default %d max %d: one contract, two values",
			dashboard.DefaultRuns, dashboard.MaxRuns, control.DefaultHistory, control.MaxHistory)
	}
}
