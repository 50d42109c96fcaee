package api

// ErrorReply is the body of every error answer of an admin server.
type ErrorReply struct {
	// Error says what is wrong.
	Error string `json:"error"`
}

// StatusReply is the answer of Healthy, Ready and Reload on dnsd
// ("ok", "ready", "reloaded") and of PushLoad and PushRedirects
// ("accepted").
type StatusReply struct {
	Status string `json:"status"`
}

// Removed is the answer of RemoveMember.
type Removed struct {
	// Removed is the member's name.
	Removed string `json:"removed"`
}

// Drained is the answer of DrainMember and UndrainMember.
type Drained struct {
	// Drained is true after a drain, false after an undrain.
	Drained bool `json:"drained"`
	// Member is the member's name.
	Member string `json:"member"`
}
