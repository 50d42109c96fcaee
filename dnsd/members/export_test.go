package members

// Bounds of the view's JSON, for the worst-case view test.
const (
	MaxMemberViewBytes = maxMemberViewBytes
	MaxViewBytes       = maxViewBytes
)
