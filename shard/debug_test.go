package shard

import "fmt"

// debug describes the Manager's internal state for a failing test.
func (m *Manager) debug() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	phases := map[phase]int{}
	for _, h := range m.held {
		phases[h.phase]++
	}
	return fmt.Sprintf("held %d by phase %v; view rev %d listed %d, %d shard keys, %d members; session %v",
		len(m.held), phases, m.v.rev, m.v.listed, len(m.v.shards), len(m.v.members), m.sess != nil)
}
