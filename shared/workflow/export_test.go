package workflow

// JQAllocBound is jqAllocBound, for the tests of package workflow_test: the
// bound of this build (production, or instrumented).
const JQAllocBound = jqAllocBound
