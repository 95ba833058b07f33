package workflow

import "time"

// MaxRecoveryDelay caps the supervisor's backoff; it is also the longest delay
// an SQS message can carry.
const MaxRecoveryDelay = 15 * time.Minute

// Recovery is the supervisor's decision for a step whose deadline passed.
type Recovery struct {
	GiveUp       bool          // the threshold is reached: Error, alert
	FailureCount int           // the step's FailureCount after this recovery
	Delay        time.Duration // how long to wait before scheduling again (when !GiveUp)
}

// DecideRecovery returns what the supervisor does with an overdue step that
// has failed failureCount times before. FailureCount never passes MaxFailures.
func DecideRecovery(s Action, failureCount int) Recovery {
	n := failureCount + 1
	if n >= s.MaxFailures {
		return Recovery{GiveUp: true, FailureCount: s.MaxFailures}
	}
	return Recovery{FailureCount: n, Delay: RecoveryDelay(s.RetryBackoff, n)}
}

// RecoveryDelay is base doubled for each earlier failure, capped at
// MaxRecoveryDelay: base, 2·base, 4·base, …
func RecoveryDelay(base time.Duration, failureCount int) time.Duration {
	if base <= 0 || failureCount < 1 {
		return 0
	}
	d := base
	for i := 1; i < failureCount; i++ {
		d *= 2
		if d >= MaxRecoveryDelay {
			return MaxRecoveryDelay
		}
	}
	return min(d, MaxRecoveryDelay)
}
