package operator

import (
	"time"

	"github.com/sas-go/sas/shared/keyline"
)

// MaxKeysShown is how many of an agent's keys in use AgentFlow lists, the
// busiest first (all are counted).
const MaxKeysShown = 50

// keysInUse fills f's keys in use from what keyline.Store.Keys read, at
// now.
func (f *AgentFlow) keysInUse(in keyline.KeysInUse, now time.Time) {
	f.KeysInUse, f.KeyWaiters, f.Keys = in.Count, in.Waiting, in.Keys
	if !in.Oldest.IsZero() {
		f.LongestKeyWait = Duration(max(now.Sub(in.Oldest), 0).Round(time.Second))
	}
}
